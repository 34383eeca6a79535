/**
 * A local HTTP double of an SGLang server for tests, written from SGLang's own server code
 * (sgl-project/sglang `python/sglang/srt/entrypoints/http_server.py`,
 * `managers/tokenizer_manager.py`, `managers/io_struct.py`, `utils/weight_versions.py`) and
 * answering what it answers:
 * - `POST /generate` (token ids in and out, shapes as in sglang.ts). What it generates is the
 *   test's script, one token every `tokenMs`. A request that arrives while generation is paused,
 *   or while an update holds the model, waits (the tokenizer manager's `is_pause` condition and
 *   model-update lock), it is never refused. `meta_info.weight_versions` lists the runs of output
 *   tokens each weight version generated (`[{version, start, end}]`), `weight_version` the last.
 * - `POST /pause_generation` `{mode}`: "retract" and "in_place" stop every running request where
 *   it is, to resume after `/continue_generation`; "abort" (and every pause of a server from
 *   before `mode`, `pauseModes: false`) ends them with finish_reason abort.
 * - `POST /update_weights_from_disk` `{model_path, weight_version}`: unless paused, waits for the
 *   running requests to finish and holds new ones (the model-update writer lock), then loads for
 *   `loadMs`: every tensor of the directory (index + shards, or one model.safetensors) whose
 *   Hugging Face name the served model has is copied in, other names are skipped, as
 *   `load_weights` does; the version changes on success. A refused load answers HTTP 400 with
 *   `{success: false, message}` (`refusalStatus` 200 for servers that answered so). Each load's
 *   count of changed tensors is kept in `loads`; a load that changed none is recorded in
 *   `errors` (SGLang itself answers it as a success).
 * - `GET /get_weight_version`, `GET|POST /get_weights_by_name` `{name, truncate_size}` (the
 *   float32 values, first `truncate_size` rows; 400 "Get parameter by name failed" for a name
 *   the model does not have), `GET /get_server_info` (with `version`).
 * `restart()` is the engine started again: the launch weights, version "default", not paused.
 * Not used by production code.
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { type MoeGeometry, readModelGeometry } from "../../../model/template/geometry.ts"
import {
  Changes,
  type DoubleTurn,
  type GenerateCall,
  scriptedCall,
  sleep,
  versionSpans,
} from "./double-turn.ts"
import {
  type LoadReport,
  NoCheckpoint,
  readCheckpointDir,
  type ServedTensor,
  ServedWeights,
} from "./served-weights.ts"
import { BadRequest, expectField, type Received, type Reply } from "./test-server.ts"

export interface SglangDoubleOptions {
  /** The model directory the server was launched on: the tensors it serves. None: no tensors. */
  readonly launchDir?: string
  /** Milliseconds each update_weights_from_disk spends loading. Default 0. */
  readonly loadMs?: number
  /** Milliseconds per generated token. Default 0. */
  readonly tokenMs?: number
  /** `version` in /get_server_info. Default "0.5.6". */
  readonly serverVersion?: string
  /** Whether /pause_generation reads `mode` (SGLang after 0.5.5); otherwise it aborts. Default true. */
  readonly pauseModes?: boolean
  /** Whether answers carry `meta_info.weight_versions` (newer SGLang). Default true. */
  readonly reportsSpans?: boolean
}

export interface SglangDouble {
  readonly handler: (request: Received) => Promise<Reply>
  /** Every /generate answered, oldest first. */
  readonly calls: ReadonlyArray<GenerateCall>
  /** The weight version the server reports. */
  weightVersion: string
  /** Refit calls and generations ("generate <weight version>") as they were answered. */
  readonly log: string[]
  /**
   * The log's refit calls, in order: "pause <mode>", "update <path> <version>", "continue",
   * "refused …", "hang …".
   */
  readonly refits: ReadonlyArray<string>
  /** Every load that was answered as a success, with what it changed. */
  readonly loads: ReadonlyArray<LoadReport & { readonly version: string; readonly path: string }>
  /** Loads that changed no served tensor. */
  readonly errors: ReadonlyArray<string>
  /** Answers that carried meta_info.routed_experts (requested with return_routed_experts). */
  routedAnswers: number
  /** The served tensors. */
  readonly weights: ServedWeights
  /** Updates to refuse before one loads. */
  failUpdates: number
  /** Updates to leave unanswered (the bridge's call times out). */
  hangUpdates: number
  /** A broken engine: updates answer success and set the version but change no tensor. */
  ignoreLoads: boolean
  /** HTTP status of a refused update: 400 (SGLang's http_server) or 200. */
  refusalStatus: 400 | 200
  loadMs: number
  tokenMs: number
  readonly serverVersion: string
  paused: boolean
  /** Requests generating now. */
  readonly running: number
  /** The engine restarted: launch weights, version "default", not paused. */
  restart(): void
}

interface Running {
  aborted: boolean
}

const PAUSE_MODES = ["abort", "retract", "in_place"]

export const sglangDouble = (
  turn: (inputIds: ReadonlyArray<number>) => DoubleTurn,
  options: SglangDoubleOptions = {},
): SglangDouble => {
  const calls: GenerateCall[] = []
  const loads: Array<LoadReport & { version: string; path: string }> = []
  const errors: string[] = []
  const changes = new Changes()
  const running = new Set<Running>()
  const pauseModes = options.pauseModes ?? true
  const reportsSpans = options.reportsSpans ?? true
  const weights = new ServedWeights()
  let launch: Map<string, ServedTensor> | undefined
  let launched: Promise<void> | undefined
  /** An update holds the model: new requests wait (the model-update writer lock). */
  let updating = false
  /** Weights are being copied: no forward pass of any request. */
  let loading = false

  /** The MoE geometry of the launch directory's config.json (what routed_experts covers). */
  let launchConfig: MoeGeometry | undefined
  const ready = () => {
    launched ??= (async () => {
      launch =
        options.launchDir === undefined ? new Map() : await readCheckpointDir(options.launchDir)
      if (options.launchDir !== undefined) launchConfig = readModelGeometry(options.launchDir)
      weights.reset(launch)
    })()
    return launched
  }

  const refuse = (path: string, version: string, message: string): Reply => {
    double.log.push(`refused ${path} ${version}`)
    return {
      status: double.refusalStatus,
      body: { success: false, message, num_paused_requests: 0 },
    }
  }

  const update = async (body: Record<string, unknown>): Promise<Reply> => {
    const path = String(body.model_path ?? "")
    const version = body.weight_version === undefined ? undefined : String(body.weight_version)
    const label = version ?? ""
    if (double.hangUpdates > 0) {
      double.hangUpdates--
      double.log.push(`hang ${path} ${label}`)
      return "hang"
    }
    if (double.failUpdates > 0) {
      double.failUpdates--
      return refuse(path, label, "Failed to load weights: CUDA out of memory")
    }
    if (!double.paused) {
      // Not paused: the update waits for the running requests, and new ones wait for it.
      updating = true
      changes.notify()
      await changes.until(() => running.size === 0)
    }
    loading = true
    changes.notify()
    try {
      await sleep(double.loadMs)
      if (!existsSync(join(path, "config.json")))
        return refuse(path, label, `Failed to get config of ${path}: no config.json`)
      let report: LoadReport
      try {
        const checkpoint = await readCheckpointDir(path)
        report = double.ignoreLoads
          ? { known: 0, changed: 0, skipped: [], served: weights.size }
          : weights.load(checkpoint)
      } catch (e) {
        if (e instanceof NoCheckpoint || e instanceof Error)
          return refuse(path, label, `Failed to load weights: ${e.message}`)
        throw e
      }
      loads.push({ ...report, version: label, path })
      if (report.changed === 0)
        errors.push(
          `update ${path} ${label}: changed 0 of ${report.served} served tensors (${report.skipped.length} checkpoint tensors skipped as unknown)`,
        )
      if (version !== undefined) double.weightVersion = version
      double.log.push(`update ${path} ${label}`)
      return {
        status: 200,
        body: {
          success: true,
          message: `Succeeded to update model weights.${version === undefined ? "" : ` Weight version updated to ${version}.`}`,
          num_paused_requests: 0,
        },
      }
    } finally {
      loading = false
      updating = false
      changes.notify()
    }
  }

  const pause = (body: Record<string, unknown>): Reply => {
    const mode = pauseModes ? String(body.mode ?? "abort") : "abort"
    if (!PAUSE_MODES.includes(mode))
      return {
        status: 400,
        body: {
          object: "error",
          message: `Invalid mode: '${mode}'. Expected one of ${JSON.stringify(PAUSE_MODES)}.`,
          type: "Bad Request",
          code: 400,
        },
      }
    double.paused = true
    if (mode === "abort") for (const r of running) r.aborted = true
    changes.notify()
    double.log.push(`pause ${mode}`)
    return { status: 200, body: { message: "Generation paused successfully.", status: "ok" } }
  }

  /**
   * `meta_info.routed_experts` as SGLang's RoutedExpertsCapturer answers it (launched with
   * --enable-return-routed-experts): int32 [positions, num_hidden_layers, num_experts_per_tok]
   * for positions [routed_experts_start_len, seqlen - 1), base64 of the little-endian bytes. The
   * ids are scripted (distinct per position and layer), since the double runs no router.
   */
  const routedExperts = (body: Record<string, unknown>, seqLen: number): string => {
    const config = launchConfig
    if (config === undefined)
      throw new BadRequest("return_routed_experts: the server was launched without a model dir")
    const from =
      typeof body.routed_experts_start_len === "number" ? body.routed_experts_start_len : 0
    const rows = Math.max(0, seqLen - 1 - from)
    const layers = config.hiddenLayers
    const { topK, numExperts } = config
    const ids = new Int32Array(rows * layers * topK)
    for (let r = 0; r < rows; r++)
      for (let l = 0; l < layers; l++)
        for (let k = 0; k < topK; k++)
          ids[(r * layers + l) * topK + k] = ((from + r) * 7 + l * 3 + k) % numExperts
    return Buffer.from(ids.buffer, ids.byteOffset, ids.byteLength).toString("base64")
  }

  const generate = async (body: Record<string, unknown>): Promise<Reply> => {
    const ids = body.input_ids
    if (!Array.isArray(ids) || !ids.every(Number.isInteger))
      throw new BadRequest("input_ids must be a list of ints")
    const params = body.sampling_params as Record<string, unknown>
    expectField(params, "skip_special_tokens", false)
    expectField(params, "no_stop_trim", true)
    expectField(body, "return_logprob", true)
    const maxNew = params.max_new_tokens
    if (typeof maxNew !== "number") throw new BadRequest("max_new_tokens must be a number")
    const call = scriptedCall(
      turn,
      ids as number[],
      maxNew,
      (params.stop_token_ids as number[] | undefined) ?? [],
    )
    await changes.until(() => !double.paused && !updating)
    const self: Running = { aborted: false }
    running.add(self)
    const perToken: string[] = []
    try {
      while (perToken.length < call.outputIds.length) {
        await changes.until(() => self.aborted || (!double.paused && !loading))
        if (self.aborted) break
        await sleep(double.tokenMs)
        // The forward pass happens at the end of the step; a pause or load meanwhile redoes it.
        if (self.aborted) break
        if (double.paused || loading) continue
        perToken.push(double.weightVersion)
      }
    } finally {
      running.delete(self)
      changes.notify()
    }
    const outputIds = call.outputIds.slice(0, perToken.length)
    const logprobs = call.logprobs.slice(0, perToken.length)
    const spans = versionSpans(perToken, double.weightVersion)
    const routed =
      body.return_routed_experts === true
        ? routedExperts(body, ids.length + outputIds.length)
        : undefined
    if (routed !== undefined) double.routedAnswers++
    const finish = self.aborted ? "abort" : call.finish
    const last = outputIds[outputIds.length - 1]
    double.log.push(`generate ${spans[spans.length - 1]?.version ?? double.weightVersion}`)
    calls.push({ inputIds: call.inputIds, outputIds, logprobs, finish, weightVersions: spans })
    return {
      status: 200,
      body: {
        text: "",
        output_ids: outputIds,
        meta_info: {
          id: `req-${calls.length}`,
          finish_reason:
            finish === "abort"
              ? { type: "abort", message: "Abort all requests: generation paused" }
              : finish === "stop"
                ? { type: "stop", matched: last }
                : { type: "length", length: outputIds.length },
          prompt_tokens: ids.length,
          completion_tokens: outputIds.length,
          cached_tokens: 0,
          weight_version: spans[spans.length - 1]?.version ?? double.weightVersion,
          ...(reportsSpans ? { weight_versions: spans } : {}),
          ...(routed === undefined ? {} : { routed_experts: routed }),
          output_token_logprobs: outputIds.map((token, i) => [logprobs[i], token, null]),
          e2e_latency: 0.001,
        },
      },
    }
  }

  const readBack = (body: Record<string, unknown>): Reply => {
    const name = typeof body.name === "string" ? body.name : ""
    const truncate = typeof body.truncate_size === "number" ? body.truncate_size : 100
    const values = weights.readBack(name, truncate)
    if (values === undefined)
      return { status: 400, body: { error: { message: "Get parameter by name failed" } } }
    return { status: 200, body: values }
  }

  const double: SglangDouble = {
    calls,
    loads,
    errors,
    weights,
    weightVersion: "default",
    routedAnswers: 0,
    log: [],
    get refits() {
      return double.log.filter((l) => !l.startsWith("generate "))
    },
    failUpdates: 0,
    hangUpdates: 0,
    ignoreLoads: false,
    refusalStatus: 400,
    loadMs: options.loadMs ?? 0,
    tokenMs: options.tokenMs ?? 0,
    serverVersion: options.serverVersion ?? "0.5.6",
    paused: false,
    get running() {
      return running.size
    },
    restart() {
      weights.reset(launch ?? new Map())
      double.weightVersion = "default"
      double.paused = false
      for (const r of running) r.aborted = true
      changes.notify()
    },
    handler: async (request) => {
      await ready()
      const body = (request.body ?? {}) as Record<string, unknown>
      const [path] = request.path.split("?")
      try {
        if (request.method === "GET") {
          if (path === "/get_weight_version")
            return { status: 200, body: { weight_version: double.weightVersion } }
          if (path === "/get_server_info" || path === "/server_info")
            return {
              status: 200,
              body: { version: double.serverVersion, weight_version: double.weightVersion },
            }
          if (path === "/get_weights_by_name") return readBack(body)
        }
        if (request.method === "POST")
          switch (path) {
            case "/generate":
              return await generate(body)
            case "/pause_generation":
              return pause(body)
            case "/continue_generation":
              double.paused = false
              changes.notify()
              double.log.push("continue")
              return {
                status: 200,
                body: { message: "Generation continued successfully.", status: "ok" },
              }
            case "/update_weights_from_disk":
              return await update(body)
            case "/get_weights_by_name":
              return readBack(body)
          }
        return { status: 404, body: { detail: "Not Found" } }
      } catch (error) {
        if (error instanceof BadRequest)
          return { status: 400, body: { error: { message: error.message } } }
        throw error
      }
    },
  }
  return double
}
