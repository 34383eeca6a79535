/**
 * A local HTTP double of an inference engine for tests (SGLang's native `/generate`, token ids in
 * and out), following the request and answer shapes documented in sglang.ts. What it generates
 * is the test's script: the double checks the request, asks `turn` for the continuation of the
 * context it was sent, and answers with SGLang's fields (`output_ids`, `meta_info.finish_reason`,
 * `output_token_logprobs`, `weight_version`). It records every context and answer, so a test can
 * compare what was sampled with what the trajectory holds. It also serves SGLang's refit sequence
 * (`/pause_generation`, `/update_weights_from_disk` with `model_path` and `weight_version`,
 * `/continue_generation`): an update checks the checkpoint directory (its index and config.json),
 * then reports the new version in every answer; `failUpdates` refuses the next updates as SGLang
 * does (`success: false`) and `hangUpdates` never answers them (a timeout mid-update).
 * `restart()` is an engine that came back with its initial weights. `vllmDouble` is the same for
 * vLLM: `/v1/completions` with token prompts, and its reload-from-disk sequence (`/pause`,
 * `/collective_rpc` `reload_weights`, `/update_weight_version`, `GET /weight_info`, `/resume`).
 * Not used by production code.
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { BadRequest, expectField, type Received, type Reply } from "./test-server.ts"

export interface DoubleTurn {
  /** The generated ids; a final id that is one of the request's stop_token_ids is a stop. */
  readonly tokens: ReadonlyArray<number>
}

export interface GenerateCall {
  readonly inputIds: ReadonlyArray<number>
  readonly outputIds: ReadonlyArray<number>
  readonly logprobs: ReadonlyArray<number>
  readonly finish: "stop" | "length"
}

export interface SglangDouble {
  readonly handler: (request: Received) => Reply
  /** Every /generate answered, oldest first. */
  readonly calls: ReadonlyArray<GenerateCall>
  /** The weight version the double reports (`meta_info.weight_version`). */
  weightVersion: string
  /** Refit calls and generations ("generate <weight version>") as they were answered. */
  readonly log: string[]
  /**
   * The log's refit calls, in order: "pause <mode>", "update <path> <version>", "continue",
   * "refused …", "hang …".
   */
  readonly refits: ReadonlyArray<string>
  /** Updates to refuse (`success: false`) before one loads. */
  failUpdates: number
  /** Updates to leave unanswered (the bridge's call times out). */
  hangUpdates: number
  paused: boolean
  /** The engine restarted: back to its initial weights, not paused. */
  restart(): void
}

/** Log-prob of the i-th generated token of a turn: distinct, exact in float32. */
const logprobAt = (i: number) => -((i % 16) + 1) / 16

/** The test's scripted continuation of `inputIds`, cut at the first stop id and at `maxNew`. */
const scriptedCall = (
  turn: (inputIds: ReadonlyArray<number>) => DoubleTurn,
  inputIds: ReadonlyArray<number>,
  maxNew: number,
  stopIds: ReadonlyArray<number>,
): GenerateCall & { readonly last: number | undefined } => {
  const scripted = turn(inputIds).tokens
  const cut = scripted.findIndex((t) => stopIds.includes(t))
  const outputIds = scripted.slice(0, Math.min(maxNew, cut < 0 ? scripted.length : cut + 1))
  const last = outputIds[outputIds.length - 1]
  return {
    inputIds,
    outputIds,
    logprobs: outputIds.map((_, i) => logprobAt(i)),
    finish: last !== undefined && stopIds.includes(last) ? "stop" : "length",
    last,
  }
}

export const sglangDouble = (
  turn: (inputIds: ReadonlyArray<number>) => DoubleTurn,
): SglangDouble => {
  const calls: GenerateCall[] = []
  const refit = (request: Received): Reply | undefined => {
    const body = (request.body ?? {}) as Record<string, unknown>
    switch (request.path) {
      case "/pause_generation":
        double.paused = true
        double.log.push(`pause ${String(body.mode ?? "abort")}`)
        return { status: 200, body: { message: "Generation paused" } }
      case "/continue_generation":
        double.paused = false
        double.log.push("continue")
        return { status: 200, body: { message: "Generation continued" } }
      case "/update_weights_from_disk": {
        const path = String(body.model_path ?? "")
        const version = String(body.weight_version ?? "")
        if (double.hangUpdates > 0) {
          double.hangUpdates--
          double.log.push(`hang ${path} ${version}`)
          return "hang"
        }
        if (double.failUpdates > 0) {
          double.failUpdates--
          double.log.push(`refused ${path} ${version}`)
          return {
            status: 200,
            body: {
              success: false,
              message: "Failed to load weights: CUDA out of memory",
              num_paused_requests: 0,
            },
          }
        }
        if (
          !existsSync(join(path, "config.json")) ||
          !existsSync(join(path, "model.safetensors.index.json"))
        ) {
          double.log.push(`refused ${path} ${version}`)
          return {
            status: 200,
            body: {
              success: false,
              message: `${path} holds no checkpoint`,
              num_paused_requests: 0,
            },
          }
        }
        double.weightVersion = version
        double.log.push(`update ${path} ${version}`)
        return {
          status: 200,
          body: {
            success: true,
            message: "Succeeded to update model weights.",
            num_paused_requests: 0,
          },
        }
      }
      default:
        return undefined
    }
  }
  const double: SglangDouble = {
    calls,
    weightVersion: "default",
    log: [],
    get refits() {
      return double.log.filter((l) => !l.startsWith("generate "))
    },
    failUpdates: 0,
    hangUpdates: 0,
    paused: false,
    restart() {
      double.weightVersion = "default"
      double.paused = false
    },
    handler: (request) => {
      if (request.method === "POST") {
        const answered = refit(request)
        if (answered !== undefined) return answered
      }
      if (request.method !== "POST" || request.path !== "/generate")
        return { status: 404, body: { detail: "Not Found" } }
      if (double.paused)
        return { status: 503, body: { error: { message: "generation is paused" } } }
      try {
        const body = request.body as Record<string, unknown>
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
        const { outputIds, logprobs, last, finish } = call
        const stopped = finish === "stop"
        double.log.push(`generate ${double.weightVersion}`)
        calls.push({ inputIds: call.inputIds, outputIds, logprobs, finish })
        return {
          status: 200,
          body: {
            text: "",
            output_ids: outputIds,
            meta_info: {
              id: `req-${calls.length}`,
              finish_reason: stopped
                ? { type: "stop", matched: last }
                : { type: "length", length: outputIds.length },
              prompt_tokens: ids.length,
              completion_tokens: outputIds.length,
              cached_tokens: 0,
              weight_version: double.weightVersion,
              output_token_logprobs: outputIds.map((token, i) => [logprobs[i], token, null]),
              e2e_latency: 0.001,
            },
          },
        }
      } catch (error) {
        if (error instanceof BadRequest)
          return { status: 400, body: { error: { message: error.message } } }
        throw error
      }
    },
  }
  return double
}

export interface VllmDouble {
  readonly handler: (request: Received) => Reply
  /** Every /v1/completions answered, oldest first. */
  readonly calls: ReadonlyArray<GenerateCall>
  /** The weights the engine holds: the last checkpoint reloaded ("initial" before any). */
  weights: string
  /** What `GET /weight_info` reports (`null` until a version is set, as after a start). */
  weightVersion: string | null
  /**
   * Refit calls and generations as they were answered: "pause <mode>", "reload <path>",
   * "version <v>", "resume", "refused …", "hang …", "generate <weights>".
   */
  readonly log: string[]
  readonly refits: ReadonlyArray<string>
  /** Reloads to fail (HTTP 500, as a worker exception surfaces) before one loads. */
  failUpdates: number
  /** Reloads to leave unanswered (the bridge's call times out). */
  hangUpdates: number
  paused: boolean
  /** The engine restarted: its initial weights, no version, not paused. */
  restart(): void
}

export const vllmDouble = (
  model: string,
  turn: (inputIds: ReadonlyArray<number>) => DoubleTurn,
): VllmDouble => {
  const calls: GenerateCall[] = []
  const refit = (request: Received): Reply | undefined => {
    const body = (request.body ?? {}) as Record<string, unknown>
    const [path, query = ""] = request.path.split("?")
    if (request.method === "GET" && path === "/weight_info")
      return { status: 200, body: { weight_version: double.weightVersion } }
    if (request.method !== "POST") return undefined
    switch (path) {
      case "/pause":
        double.paused = true
        double.log.push(`pause ${new URLSearchParams(query).get("mode") ?? "abort"}`)
        return { status: 200, body: { status: "paused" } }
      case "/resume":
        double.paused = false
        double.log.push("resume")
        return { status: 200, body: { status: "resumed" } }
      case "/update_weight_version": {
        if (typeof body.new_version !== "string")
          return {
            status: 422,
            body: { detail: [{ loc: ["body", "new_version"], msg: "Field required" }] },
          }
        double.weightVersion = body.new_version
        double.log.push(`version ${body.new_version}`)
        return { status: 200, body: { success: true, new_version: body.new_version } }
      }
      case "/collective_rpc": {
        if (body.method !== "reload_weights")
          return { status: 500, body: { error: `unknown method ${String(body.method)}` } }
        const kwargs = (body.kwargs ?? {}) as Record<string, unknown>
        const dir = String(kwargs.weights_path ?? "")
        if (kwargs.is_checkpoint_format !== true)
          return {
            status: 400,
            body: { detail: "the double reloads checkpoint-format weights only" },
          }
        if (double.hangUpdates > 0) {
          double.hangUpdates--
          double.log.push(`hang ${dir}`)
          return "hang"
        }
        if (double.failUpdates > 0) {
          double.failUpdates--
          double.log.push(`refused ${dir}`)
          return { status: 500, body: { error: "RuntimeError: CUDA out of memory" } }
        }
        if (
          !existsSync(join(dir, "config.json")) ||
          !existsSync(join(dir, "model.safetensors.index.json"))
        ) {
          double.log.push(`refused ${dir}`)
          return { status: 500, body: { error: `FileNotFoundError: no safetensors in ${dir}` } }
        }
        double.weights = dir
        double.log.push(`reload ${dir}`)
        // collective_rpc answers an empty 200 when every worker's method returned nothing.
        return { status: 200, body: "" }
      }
      default:
        return undefined
    }
  }
  const double: VllmDouble = {
    calls,
    weights: "initial",
    weightVersion: null,
    log: [],
    get refits() {
      return double.log.filter((l) => !l.startsWith("generate "))
    },
    failUpdates: 0,
    hangUpdates: 0,
    paused: false,
    restart() {
      double.weights = "initial"
      double.weightVersion = null
      double.paused = false
    },
    handler: (request) => {
      const answered = refit(request)
      if (answered !== undefined) return answered
      if (request.method !== "POST" || request.path !== "/v1/completions")
        return { status: 404, body: { detail: "Not Found" } }
      // A paused vLLM holds new requests until /resume; the double refuses them, which a test
      // sees as a turn sent while the bridge said the replica was out.
      if (double.paused) return { status: 503, body: { error: { message: "engine is paused" } } }
      try {
        const body = request.body as Record<string, unknown>
        expectField(body, "model", model)
        const ids = body.prompt
        if (!Array.isArray(ids) || !ids.every(Number.isInteger))
          throw new BadRequest("prompt must be token ids")
        expectField(body, "logprobs", 1)
        expectField(body, "return_tokens_as_token_ids", true)
        expectField(body, "skip_special_tokens", false)
        const maxNew = body.max_tokens
        if (typeof maxNew !== "number") throw new BadRequest("max_tokens must be a number")
        const call = scriptedCall(
          turn,
          ids as number[],
          maxNew,
          (body.stop_token_ids as number[] | undefined) ?? [],
        )
        const { outputIds, logprobs, last, finish } = call
        const stopped = finish === "stop"
        double.log.push(`generate ${double.weights}`)
        calls.push({ inputIds: call.inputIds, outputIds, logprobs, finish })
        return {
          status: 200,
          body: {
            id: `cmpl-${calls.length}`,
            object: "text_completion",
            model,
            choices: [
              {
                index: 0,
                text: "",
                logprobs: {
                  text_offset: outputIds.map((_, i) => i),
                  token_logprobs: logprobs,
                  tokens: outputIds.map((t) => `token_id:${t}`),
                  top_logprobs: outputIds.map((t, i) => ({ [`token_id:${t}`]: logprobs[i] })),
                },
                finish_reason: stopped ? "stop" : "length",
                stop_reason: stopped ? last : null,
                token_ids: outputIds,
                routed_experts: null,
              },
            ],
            usage: {
              prompt_tokens: ids.length,
              completion_tokens: outputIds.length,
              total_tokens: ids.length + outputIds.length,
            },
          },
        }
      } catch (error) {
        if (error instanceof BadRequest)
          return { status: 400, body: { error: { message: error.message } } }
        throw error
      }
    },
  }
  return double
}
