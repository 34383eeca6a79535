/**
 * Pushing new weights into an inference engine replica (issue 16: weight sync). SGLang's
 * documented refit sequence for weights on disk (docs/advanced_features/sglang_for_rl.md):
 * `POST /pause_generation` (mode `retract`: running requests go back to the waiting queue and
 * resume after the update), `POST /update_weights_from_disk` with `model_path` and the version as
 * `weight_version` (answer `{success, message}`), `POST /continue_generation`. Every answer then
 * names the weights that generated it, run by run (`meta_info.weight_versions`), which sglang.ts
 * turns into the turn's policy version (the oldest run's). After each load the replica is
 * confirmed before it takes turns again: `GET /get_weight_version` must name the version, and one
 * tensor read back must be the exported one (read-back.ts).
 */
import { Data, Effect, Option } from "effect"
import type { PolicyError } from "./backend.ts"
import { isRecord } from "./fields.ts"
import { type Fetch, postJson } from "./http.ts"
import { exportedTensor, READ_BACK_ROWS, readBackMismatch } from "./read-back.ts"

/** One replica's update failed: the endpoint that refused it and why; retryable or not. */
export class WeightSyncFailed extends Data.TaggedError("WeightSyncFailed")<{
  readonly replica: string
  readonly endpoint: string
  readonly version: bigint
  readonly reason: string
  readonly retryable: boolean
  /** The HTTP status the endpoint answered, when it answered one. */
  readonly status?: number
}> {
  override get message(): string {
    return `weights v${this.version} to ${this.replica}: ${this.endpoint}: ${this.reason}`
  }
}

/**
 * The engine answered its load as a success but does not hold the checkpoint: the endpoint that
 * showed it (`/get_weight_version`, `/get_weights_by_name`) and what it holds instead. Retrying
 * the same load does not help; the replica stays out of rotation until a later load confirms.
 */
export class WeightsNotLoaded extends Data.TaggedError("WeightsNotLoaded")<{
  readonly replica: string
  readonly endpoint: string
  readonly version: bigint
  readonly reason: string
}> {
  override get message(): string {
    return `weights v${this.version} to ${this.replica}: the engine reported success but ${this.endpoint} shows it did not load them: ${this.reason}`
  }
}

/** A checkpoint directory an engine can read, and the policy version it holds. */
export interface CheckpointRef {
  readonly path: string
  readonly version: bigint
}

/** Loads a checkpoint into one engine replica. */
export interface EngineWeightSync {
  /** The replica (its URL). */
  readonly replica: string
  /**
   * Whether the replica must have no turn of ours in flight while it loads: true where the
   * engine's answers do not say which weights produced them (vLLM), so a turn's version is the
   * one the replica held when the turn was sent, and no update may happen under it.
   */
  readonly drains: boolean
  readonly update: (
    checkpoint: CheckpointRef,
  ) => Effect.Effect<void, WeightSyncFailed | WeightsNotLoaded>
  /** The version the engine reports holding now (a restarted engine names no job version). */
  readonly reported: Effect.Effect<string, WeightSyncFailed>
}

/** One engine replica's refit endpoints. */
export interface EngineSyncOptions {
  readonly baseUrl: string
  /** Limit of each call; the disk load of a large checkpoint takes minutes. Default 30 min. */
  readonly timeoutMs?: number
  readonly headers?: Readonly<Record<string, string>>
  readonly fetch?: Fetch
}

/** A refit call to the replica at `options.baseUrl` whose failure names the endpoint. */
const refitCall =
  (backend: string, options: EngineSyncOptions) =>
  (
    endpoint: string,
    version: bigint,
    request: { readonly method?: "GET" | "POST"; readonly body?: unknown } = {},
  ) => {
    const root = options.baseUrl.replace(/\/+$/, "")
    return postJson({
      backend,
      url: `${root}${endpoint}`,
      ...request,
      timeoutMs: options.timeoutMs ?? 30 * 60_000,
      ...(options.headers ? { headers: options.headers } : {}),
      ...(options.fetch ? { fetch: options.fetch } : {}),
    }).pipe(
      Effect.mapError(
        (e: PolicyError) =>
          new WeightSyncFailed({
            replica: root,
            endpoint: endpoint.replace(/\?.*$/, ""),
            version,
            reason: e.message,
            retryable: e.retryable,
            ...(e.status === undefined ? {} : { status: e.status }),
          }),
      ),
    )
  }

/** How the SGLang bridge reads a tensor back after each load. */
export type ReadBack =
  /** Where the engine offers it: a 400 before it ever answered is "not offered" (confirmed by version only), after that a failure. */
  | "auto"
  /** Always: an engine that cannot answer fails the load. */
  | "required"
  /** Never: confirmed by `/get_weight_version` only. */
  | "off"

export interface SglangSyncOptions extends EngineSyncOptions {
  /** Default "auto". */
  readonly readBack?: ReadBack
}

/**
 * Whether an SGLang release reads `/pause_generation`'s `mode`. `PauseGenerationReqInput` and its
 * `mode` (abort | retract | in_place) came after 0.5.5; through 0.5.5 the endpoint takes no body
 * and aborts every running request. An unreadable version counts as the older server.
 */
export const sglangPauseTakesMode = (version: string): boolean => {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(version.trim())
  if (m === null) return false
  const [major, minor, patch] = [Number(m[1]), Number(m[2]), Number(m[3])]
  return major > 0 || minor > 5 || (minor === 5 && patch >= 6)
}

/**
 * SGLang's refit with confirmation. The pause mode follows the server's version
 * (`GET /get_server_info`, `/server_info` on releases that renamed it): `retract` where `mode`
 * exists; on older servers no pause at all, since their pause aborts running requests, and
 * `update_weights_from_disk` alone waits for the running requests to finish and holds new ones
 * (the tokenizer manager's model-update lock), so no turn straddles the load. A refused load is
 * HTTP 400 `{success: false, message}` (or 200 with `success: false` on servers that answer so).
 * After the load, still paused: `/get_weight_version` must name the version and one tensor read
 * back must equal the exported one; otherwise WeightsNotLoaded names the endpoint.
 */
export const sglangWeightSync = (options: SglangSyncOptions): EngineWeightSync => {
  const replica = options.baseUrl.replace(/\/+$/, "")
  const call = refitCall("sglang", options)
  const readBack = options.readBack ?? "auto"
  /** Whether this replica has answered a read-back ("auto" trusts a 400 only before that). */
  let offered = false
  let warned = false
  const serverVersion = (version: bigint) =>
    call("/get_server_info", version, { method: "GET" }).pipe(
      Effect.catchIf(
        (e) => e.status === 404,
        () =>
          call("/server_info", version, { method: "GET" }).pipe(
            // Neither route: a server too old to say, treated as one without pause modes.
            Effect.catchIf(
              (e) => e.status === 404,
              () => Effect.succeed(undefined),
            ),
          ),
      ),
      Effect.map((info) =>
        isRecord(info) && typeof info.version === "string" ? info.version : "",
      ),
    )
  const reportedVersion = (version: bigint) =>
    call("/get_weight_version", version, { method: "GET" }).pipe(
      Effect.map((answer) =>
        isRecord(answer) && answer.weight_version !== null && answer.weight_version !== undefined
          ? String(answer.weight_version)
          : "",
      ),
    )
  const notLoaded = (endpoint: string, version: bigint, reason: string) =>
    new WeightsNotLoaded({ replica, endpoint, version, reason })
  const confirm = (path: string, version: bigint) =>
    Effect.gen(function* () {
      const reported = yield* reportedVersion(version)
      if (reported !== version.toString())
        return yield* notLoaded(
          "/get_weight_version",
          version,
          `it reports ${JSON.stringify(reported)}`,
        )
      if (readBack === "off") return
      const tensor = yield* Effect.promise(() => exportedTensor(path).catch(() => undefined))
      if (tensor === undefined) return
      const answer = yield* call("/get_weights_by_name", version, {
        body: { name: tensor.name, truncate_size: READ_BACK_ROWS },
      }).pipe(
        Effect.map(Option.some),
        Effect.catchIf(
          (e) => !e.retryable && readBack === "auto" && !offered,
          (e) =>
            Effect.as(
              warned
                ? Effect.void
                : Effect.sync(() => {
                    warned = true
                  }).pipe(
                    Effect.andThen(
                      Effect.logWarning(
                        `engine bridge: ${replica} does not read tensors back (${e.reason}); its loads are confirmed by /get_weight_version only`,
                      ),
                    ),
                  ),
              Option.none(),
            ),
        ),
        Effect.catchIf(
          (e) => !e.retryable,
          (e) =>
            Effect.fail(notLoaded("/get_weights_by_name", version, `${tensor.name}: ${e.reason}`)),
        ),
      )
      if (Option.isNone(answer)) return
      offered = true
      const mismatch = readBackMismatch(answer.value, tensor, READ_BACK_ROWS)
      if (mismatch !== undefined)
        return yield* notLoaded("/get_weights_by_name", version, `${tensor.name} ${mismatch}`)
    })
  return {
    replica,
    drains: false,
    reported: reportedVersion(0n),
    update: ({ path, version }) =>
      Effect.gen(function* () {
        const pauses = sglangPauseTakesMode(yield* serverVersion(version))
        if (pauses) yield* call("/pause_generation", version, { body: { mode: "retract" } })
        const loaded = yield* call("/update_weights_from_disk", version, {
          body: { model_path: path, weight_version: version.toString(), flush_cache: true },
        }).pipe(
          Effect.flatMap((answer) =>
            isRecord(answer) && answer.success === true
              ? Effect.void
              : Effect.fail(
                  new WeightSyncFailed({
                    replica,
                    endpoint: "/update_weights_from_disk",
                    version,
                    reason: `refused: ${isRecord(answer) && typeof answer.message === "string" ? answer.message : JSON.stringify(answer)}`,
                    retryable: true,
                  }),
                ),
          ),
          // A refusal answered as HTTP 400 is the same refusal; the bridge retries it.
          Effect.mapError((e) =>
            e.endpoint === "/update_weights_from_disk"
              ? new WeightSyncFailed({
                  replica: e.replica,
                  endpoint: e.endpoint,
                  version: e.version,
                  reason: e.reason,
                  retryable: true,
                })
              : e,
          ),
          Effect.andThen(confirm(path, version)),
          Effect.result,
        )
        // Generation continues either way: the retracted requests resume (their answers name
        // the weights of each run), and the bridge keeps a replica whose load failed out of
        // rotation until a retry or a later version confirms.
        if (pauses) yield* call("/continue_generation", version, { body: {} })
        if (loaded._tag === "Failure") return yield* loaded.failure
      }),
  }
}

/**
 * The version a vLLM server reports in `GET /weight_info` (`weight_version`). Versions the bridge
 * sets are decimal; anything else (unset, or a name given at start) is the weights the engine
 * started with: 0.
 */
export const vllmReportedVersion = (answer: unknown): bigint => {
  const v = isRecord(answer) ? answer.weight_version : undefined
  const text = v === null || v === undefined ? "" : String(v)
  return /^\d+$/.test(text) ? BigInt(text) : 0n
}

/**
 * vLLM's online weight reload from disk, over the HTTP routes a server started with
 * `VLLM_SERVER_DEV_MODE=1` serves (vllm/entrypoints/serve/dev/rlhf and dev/rpc): `POST /pause`
 * with `mode=wait` (running requests finish on the old weights, new ones wait), `POST
 * /collective_rpc` calling every worker's `reload_weights` with `weights_path` and
 * `is_checkpoint_format: true` (the checkpoint-format reload, which re-runs the model's weight
 * processing after loading), `POST /update_weight_version` with the version as `new_version`,
 * `GET /weight_info` to read it back, and `POST /resume`. vLLM's NCCL and CUDA-IPC weight-transfer
 * backends (`/init_weight_transfer_engine`, `/start_weight_update`, `/update_weights`,
 * `/finish_weight_update`) need the trainer to drive a collective from PyTorch, which a
 * TypeScript bridge reading checkpoints from shared storage cannot; reload-from-disk is the one
 * path that takes a directory. A failed reload may leave some layers loaded, so the replica stays
 * paused (nobody samples half-updated weights) until a retry loads the whole checkpoint.
 */
export const vllmWeightSync = (options: EngineSyncOptions): EngineWeightSync => {
  const replica = options.baseUrl.replace(/\/+$/, "")
  const call = refitCall("vllm", options)
  return {
    replica,
    drains: true,
    reported: call("/weight_info", 0n, { method: "GET" }).pipe(
      Effect.map((answer) => vllmReportedVersion(answer).toString()),
    ),
    update: ({ path, version }) =>
      Effect.gen(function* () {
        yield* call("/pause?mode=wait", version, { body: {} })
        yield* call("/collective_rpc", version, {
          body: {
            method: "reload_weights",
            kwargs: { weights_path: path, is_checkpoint_format: true },
          },
        })
        yield* call("/update_weight_version", version, {
          body: { new_version: version.toString() },
        })
        const reported = vllmReportedVersion(
          yield* call("/weight_info", version, { method: "GET" }),
        )
        if (reported !== version)
          return yield* new WeightSyncFailed({
            replica,
            endpoint: "/weight_info",
            version,
            reason: `reports weight_version ${reported} after the reload`,
            retryable: true,
          })
        yield* call("/resume", version, { body: {} })
      }),
  }
}
