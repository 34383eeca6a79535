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
  readonly update: (checkpoint: CheckpointRef) => Effect.Effect<void, WeightSyncFailed>
}

export interface SglangSyncOptions {
  readonly baseUrl: string
  /** Limit of each call; the disk load of a large checkpoint takes minutes. Default 30 min. */
  readonly timeoutMs?: number
  readonly headers?: Readonly<Record<string, string>>
  readonly fetch?: Fetch
}

export const sglangWeightSync = (options: SglangSyncOptions): EngineWeightSync => {
  const root = options.baseUrl.replace(/\/+$/, "")
  const replica = root
  const call = (endpoint: string, body: unknown, version: bigint) =>
    postJson({
      backend: "sglang",
      url: `${root}${endpoint}`,
      body,
      timeoutMs: options.timeoutMs ?? 30 * 60_000,
      ...(options.headers ? { headers: options.headers } : {}),
      ...(options.fetch ? { fetch: options.fetch } : {}),
    }).pipe(
      Effect.mapError(
        (e: PolicyError) =>
          new WeightSyncFailed({
            replica,
            endpoint,
            version,
            reason: e.message,
            retryable: e.retryable,
          }),
      ),
    )
  return {
    replica,
    update: ({ path, version }) =>
      Effect.gen(function* () {
        yield* call("/pause_generation", { mode: "retract" }, version)
        const loaded = yield* call(
          "/update_weights_from_disk",
          { model_path: path, weight_version: version.toString(), flush_cache: true },
          version,
        ).pipe(
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
        yield* call("/continue_generation", {}, version)
        if (loaded._tag === "Failure") return yield* loaded.failure
      }),
  }
}
