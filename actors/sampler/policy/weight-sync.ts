/**
 * Pushing new weights into an inference engine replica (issue 16: weight sync). SGLang's
 * documented refit sequence for weights on disk (docs/advanced_features/sglang_for_rl.md):
 * `POST /pause_generation` (mode `retract`: running requests go back to the waiting queue and
 * resume after the update), `POST /update_weights_from_disk` with `model_path` and the version as
 * `weight_version` (answer `{success, message}`), `POST /continue_generation`. The engine then
 * reports the version in every answer's `meta_info.weight_version`, which the sampler records as
 * the turn's policy version: a replica whose update failed keeps answering with its old version,
 * never with the new number.
 */
import { Data, Effect } from "effect"
import type { PolicyError } from "./backend.ts"
import { isRecord } from "./fields.ts"
import { type Fetch, postJson } from "./http.ts"

/** One replica's update failed: the endpoint that refused it and why; retryable or not. */
export class WeightSyncFailed extends Data.TaggedError("WeightSyncFailed")<{
  readonly replica: string
  readonly endpoint: string
  readonly version: bigint
  readonly reason: string
  readonly retryable: boolean
}> {
  override get message(): string {
    return `weights v${this.version} to ${this.replica}: ${this.endpoint}: ${this.reason}`
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
  readonly update: (checkpoint: CheckpointRef) => Effect.Effect<void, WeightSyncFailed>
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
          }),
      ),
    )
  }

export const sglangWeightSync = (options: EngineSyncOptions): EngineWeightSync => {
  const replica = options.baseUrl.replace(/\/+$/, "")
  const call = refitCall("sglang", options)
  return {
    replica,
    drains: false,
    update: ({ path, version }) =>
      Effect.gen(function* () {
        yield* call("/pause_generation", version, { body: { mode: "retract" } })
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
          Effect.result,
        )
        // Generation continues either way: the retracted requests resume, and a replica whose
        // load failed still answers with its old weight_version (the bridge keeps it out of
        // rotation until a retry loads the new one).
        yield* call("/continue_generation", version, { body: {} })
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
