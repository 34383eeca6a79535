/**
 * The engine bridge: keeps engine replicas on a job's latest weights. It runs inside the sampler
 * pool (`t1 actor sampler --policy sglang --job JOB --checkpoint-dir DIR`), beside the episodes
 * those replicas serve. For each WeightsAnnouncement of the job newer than the last it handled,
 * it fetches the weights (digest checked), writes them as a Hugging Face checkpoint directory
 * (`DIR/<job>/v<version>/`: safetensors shards, index, config.json; written under a temporary
 * name and renamed, so an engine never reads half a checkpoint) on storage the engines read,
 * then loads it into every replica. A replica is out of rotation while it loads; one whose load
 * fails or times out stays out and is retried, and rejoins when it holds the new version. Turns
 * carry the version the engine reports (SGLang `weight_version`), so nothing is ever sampled on
 * old weights under a new version number.
 */
import { mkdir, rename, rm, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { fromBinary } from "@bufbuild/protobuf"
import { Data, Duration, Effect, Option, Schedule, Stream } from "effect"
import { hfCheckpointFiles } from "../../model/index.ts"
import { type WeightsAnnouncement, WeightsAnnouncementSchema } from "../../proto/index.ts"
import type { BusShape, Subjects } from "../../services/bus/index.ts"
import { fetchWeightBytes, latestKey } from "../../services/weights/index.ts"
import type { CheckpointRef, EngineWeightSync, WeightSyncFailed } from "./policy/weight-sync.ts"

/** Which replicas take turns: the bridge takes them out while they load and after failures. */
export class Rotation {
  private readonly out = new Set<string>()
  /** The version each replica holds, as far as the bridge loaded it. */
  readonly versions = new Map<string, bigint>()
  isIn = (name: string): boolean => !this.out.has(name)
  take(name: string): void {
    this.out.add(name)
  }
  restore(name: string): void {
    this.out.delete(name)
  }
}

export interface EngineBridgeOptions {
  readonly bus: BusShape
  readonly subjects: Subjects
  readonly job: string
  /** Root of the checkpoints, on storage every replica reads at the same path. */
  readonly checkpointDir: string
  readonly replicas: ReadonlyArray<EngineWeightSync>
  readonly rotation: Rotation
  /** Attempts of one replica's load before it waits for the next version. Default 6. */
  readonly attempts?: number
  /** Pause before the first retry (doubling, at most 30 s). Default 1 s. */
  readonly retryDelayMs?: number
  /** Largest shard of an exported checkpoint. Default 5 GB. */
  readonly maxShardBytes?: number
}

/** A version could not be written as a checkpoint under the configured directory. */
export class CheckpointExportFailed extends Data.TaggedError("CheckpointExportFailed")<{
  readonly dir: string
  readonly version: bigint
  readonly reason: string
}> {
  override get message(): string {
    return `checkpoint v${this.version} under ${this.dir}: ${this.reason}`
  }
}

/** Writes the checkpoint of `bytes` to `dir/<job>/v<version>` and returns it. */
export const exportCheckpoint = (
  dir: string,
  job: string,
  version: bigint,
  bytes: Uint8Array,
  maxShardBytes?: number,
) =>
  Effect.tryPromise({
    try: async (): Promise<CheckpointRef> => {
      const path = join(dir, job, `v${version}`)
      const staging = `${path}.partial-${process.pid}`
      await rm(staging, { recursive: true, force: true })
      await mkdir(staging, { recursive: true })
      for (const file of hfCheckpointFiles(bytes, maxShardBytes ? { maxShardBytes } : {}))
        await writeFile(join(staging, file.name), file.bytes)
      await rm(path, { recursive: true, force: true })
      await rename(staging, path)
      return { path, version }
    },
    catch: (e) =>
      new CheckpointExportFailed({
        dir,
        version,
        reason: e instanceof Error ? e.message : String(e),
      }),
  })

/** Loads `checkpoint` into `replica`, out of rotation meanwhile; back in only once it holds it. */
const load = (o: EngineBridgeOptions, replica: EngineWeightSync, checkpoint: CheckpointRef) => {
  const attempts = o.attempts ?? 6
  // Doubling from the first delay, never more than 30 s apart.
  const schedule = Schedule.min([
    Schedule.exponential(Duration.millis(o.retryDelayMs ?? 1000)),
    Schedule.spaced("30 seconds"),
  ])
  return Effect.gen(function* () {
    o.rotation.take(replica.replica)
    yield* replica.update(checkpoint).pipe(
      Effect.tapError((e: WeightSyncFailed) =>
        Effect.logWarning(`engine bridge: ${e.message}; replica out of rotation, retrying`),
      ),
      Effect.retry({ schedule, times: attempts - 1 }),
    )
    o.rotation.versions.set(replica.replica, checkpoint.version)
    o.rotation.restore(replica.replica)
    yield* Effect.logInfo(
      `engine bridge: ${replica.replica} holds weights v${checkpoint.version} (${checkpoint.path})`,
    )
  }).pipe(
    Effect.catch((e: WeightSyncFailed) =>
      Effect.logError(
        `engine bridge: ${replica.replica} did not take v${checkpoint.version} after ${attempts} attempts (${e.message}); it stays out of rotation until a later version loads`,
      ),
    ),
  )
}

/**
 * Follows the job's announcements (the latest in KV at start, then `<prefix>.weights.<job>`)
 * and loads each newer version into every replica. Runs until interrupted.
 */
export const runEngineBridge = (o: EngineBridgeOptions) =>
  Effect.gen(function* () {
    let handled = -1n
    const apply = (a: WeightsAnnouncement) =>
      Effect.gen(function* () {
        if (a.policyVersion <= handled) return
        const bytes = yield* fetchWeightBytes(o.bus, a)
        const checkpoint = yield* exportCheckpoint(
          o.checkpointDir,
          o.job,
          a.policyVersion,
          bytes,
          o.maxShardBytes,
        )
        handled = a.policyVersion
        yield* Effect.forEach(o.replicas, (r) => load(o, r, checkpoint), {
          concurrency: "unbounded",
          discard: true,
        })
      }).pipe(
        Effect.catch((e) =>
          Effect.logWarning(
            `engine bridge: weights v${a.policyVersion} not exported: ${e.message}`,
          ),
        ),
      )
    const decode = (bytes: Uint8Array) =>
      Effect.try({
        try: () => fromBinary(WeightsAnnouncementSchema, bytes),
        catch: (e) => new Error(`undecodable announcement: ${String(e)}`),
      })
    const messages = yield* o.bus.subscribe(o.subjects.weights(o.job))
    const kv = yield* o.bus.kv(o.subjects.weightsBucket)
    const latest = yield* kv.get(latestKey(o.job))
    if (Option.isSome(latest)) yield* Effect.flatMap(decode(latest.value.value), apply)
    return yield* messages.pipe(
      Stream.runForEach((m) =>
        decode(m.data).pipe(
          Effect.flatMap(apply),
          Effect.catch((e) => Effect.logWarning(`engine bridge: ${e.message}`)),
        ),
      ),
    )
  })
