/**
 * The engine bridge: keeps engine replicas on a job's latest weights. It runs inside the sampler
 * pool (`t1 actor sampler --policy sglang|vllm --job JOB --checkpoint-dir DIR`), beside the episodes
 * those replicas serve. For each WeightsAnnouncement of the job newer than the last it handled,
 * it fetches the weights (digest checked), writes them as a Hugging Face checkpoint directory
 * (`DIR/<job>/v<version>/`: safetensors shards, index, config.json; written under a temporary
 * name and renamed, so an engine never reads half a checkpoint) on storage the engines read,
 * then loads it into every replica. A replica is out of rotation while it loads (turns wait for a
 * replica in rotation, see replicas.ts); it rejoins only once the load is confirmed (the engine
 * reports the version, and SGLang reads one tensor back equal to the export). One whose load
 * fails or times out stays out and is retried; one that reported success without loading
 * (WeightsNotLoaded) stays out until a later version confirms. Every `checkEveryMs` the replicas
 * in rotation are asked which version they hold; one found at another (an engine restarted on its
 * launch weights, "default") is taken out and loaded again before it takes another turn.
 *
 * Versions of turns: SGLang names the weights of every run of output tokens
 * (`meta_info.weight_versions`) and a turn carries the oldest, so a turn retracted by a pause and
 * resumed on the new weights is only as fresh as its oldest tokens. vLLM's answers name no
 * weights, so its replica drains before a load (the bridge waits until no turn of ours is in
 * flight there, and the pause is `mode=wait`): no turn straddles a load, and a turn carries the
 * version loaded into its replica, confirmed by `GET /weight_info` after the turn. Either way
 * nothing is sampled on old weights under a new version number.
 */
import { mkdir, rename, rm, writeFile } from "node:fs/promises"
import { dirname, join } from "node:path"
import { fromBinary } from "@bufbuild/protobuf"
import { Data, Duration, Effect, Option, Queue, Schedule, Semaphore, Stream } from "effect"
import { hfCheckpointFiles } from "../../model/index.ts"
import { type WeightsAnnouncement, WeightsAnnouncementSchema } from "../../proto/index.ts"
import type { BusShape, Subjects } from "../../services/bus/index.ts"
import { fetchWeightBytes, latestKey } from "../../services/weights/index.ts"
import type {
  CheckpointRef,
  EngineWeightSync,
  WeightSyncFailed,
  WeightsNotLoaded,
} from "./policy/weight-sync.ts"

/**
 * Which replicas take turns: the bridge takes them out while they load and after failures. It
 * also counts each replica's turns in flight, so a load that must not run under a turn (vLLM's,
 * whose answers do not name their weights) can wait until the replica has drained.
 */
export class Rotation {
  private readonly out = new Set<string>()
  private readonly inFlight = new Map<string, number>()
  private readonly idle = new Map<string, Array<() => void>>()
  private staleListener: ((name: string) => void) | undefined
  /** The version each replica holds, as far as the bridge loaded it. */
  readonly versions = new Map<string, bigint>()
  isIn = (name: string): boolean => !this.out.has(name)
  take(name: string): void {
    this.out.add(name)
  }
  restore(name: string): void {
    this.out.delete(name)
  }
  /** A turn was sent to `name`. */
  started = (name: string): void => {
    this.inFlight.set(name, (this.inFlight.get(name) ?? 0) + 1)
  }
  /** A turn sent to `name` ended (answered, failed or interrupted). */
  ended = (name: string): void => {
    const left = Math.max(0, (this.inFlight.get(name) ?? 0) - 1)
    this.inFlight.set(name, left)
    if (left > 0) return
    const waiting = this.idle.get(name) ?? []
    this.idle.delete(name)
    for (const wake of waiting) wake()
  }
  /** `name` no longer holds what the bridge loaded (it restarted): out until it is reloaded. */
  stale = (name: string): void => {
    this.take(name)
    this.staleListener?.(name)
  }
  /** The bridge's reload of replicas found stale. */
  whenStale(listener: (name: string) => void): void {
    this.staleListener = listener
  }
  turnsInFlight(name: string): number {
    return this.inFlight.get(name) ?? 0
  }
  /** Waits until `name` has no turn in flight (take it out first, or new turns keep coming). */
  drained(name: string): Effect.Effect<void> {
    return Effect.callback<void>((resume) => {
      if (this.turnsInFlight(name) === 0) {
        resume(Effect.void)
        return
      }
      const wake = () => resume(Effect.void)
      this.idle.set(name, [...(this.idle.get(name) ?? []), wake])
      return Effect.sync(() => {
        const rest = (this.idle.get(name) ?? []).filter((w) => w !== wake)
        if (rest.length > 0) this.idle.set(name, rest)
        else this.idle.delete(name)
      })
    })
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
  /**
   * How often the replicas in rotation are asked which version they hold (an engine restarted
   * on its launch weights is reloaded before it takes another turn). Default 30 s; 0: never.
   */
  readonly checkEveryMs?: number
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
      for (const file of hfCheckpointFiles(bytes, maxShardBytes ? { maxShardBytes } : {})) {
        // The critic goes to a subfolder engines do not read.
        await mkdir(dirname(join(staging, file.name)), { recursive: true })
        await writeFile(join(staging, file.name), file.bytes)
      }
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
    if (replica.drains) yield* o.rotation.drained(replica.replica)
    yield* replica.update(checkpoint).pipe(
      Effect.tapError((e) =>
        e._tag === "WeightSyncFailed"
          ? Effect.logWarning(`engine bridge: ${e.message}; replica out of rotation, retrying`)
          : Effect.void,
      ),
      // The same load into an engine that ignored it would be ignored again.
      Effect.retry({
        schedule,
        times: attempts - 1,
        while: (e: WeightSyncFailed | WeightsNotLoaded) => e._tag === "WeightSyncFailed",
      }),
    )
    o.rotation.versions.set(replica.replica, checkpoint.version)
    o.rotation.restore(replica.replica)
    yield* Effect.logInfo(
      `engine bridge: ${replica.replica} holds weights v${checkpoint.version} (${checkpoint.path})`,
    )
  }).pipe(
    Effect.catch((e: WeightSyncFailed | WeightsNotLoaded) =>
      Effect.logError(
        e._tag === "WeightsNotLoaded"
          ? `engine bridge: ${e.message}; ${replica.replica} stays out of rotation until a later version loads and is confirmed`
          : `engine bridge: ${replica.replica} did not take v${checkpoint.version} after ${attempts} attempts (${e.message}); it stays out of rotation until a later version loads`,
      ),
    ),
  )
}

/**
 * Asks every replica in rotation which version it holds; one that names another than the bridge
 * loaded is stale (taken out and reloaded). An answer that raced a load is ignored.
 */
const checkReplicas = (o: EngineBridgeOptions) =>
  Effect.forEach(
    o.replicas,
    (replica) =>
      Effect.gen(function* () {
        const name = replica.replica
        const loaded = o.rotation.versions.get(name)
        if (loaded === undefined || !o.rotation.isIn(name)) return
        const reported = yield* replica.reported
        if (!o.rotation.isIn(name) || o.rotation.versions.get(name) !== loaded) return
        if (reported === loaded.toString()) return
        yield* Effect.logWarning(
          `engine bridge: ${name} reports weights ${JSON.stringify(reported)} where v${loaded} was loaded (restarted?)`,
        )
        o.rotation.stale(name)
      }).pipe(Effect.catch(() => Effect.void)),
    { concurrency: "unbounded", discard: true },
  )

/**
 * Follows the job's announcements (the latest in KV at start, then `<prefix>.weights.<job>`)
 * and loads each newer version into every replica. Runs until interrupted.
 */
export const runEngineBridge = (o: EngineBridgeOptions) =>
  Effect.gen(function* () {
    let handled = -1n
    let latest: CheckpointRef | undefined
    // One load at a time per replica: interleaved refit calls would leave the engine on one
    // checkpoint and its version label on another.
    const permits = new Map(o.replicas.map((r) => [r.replica, Semaphore.makeUnsafe(1)]))
    const loadOne = (replica: EngineWeightSync, checkpoint: CheckpointRef) =>
      (permits.get(replica.replica) ?? Semaphore.makeUnsafe(1)).withPermit(
        Effect.suspend(() =>
          // A newer load got there first (a reload queued behind an announcement's load).
          o.rotation.isIn(replica.replica) &&
          (o.rotation.versions.get(replica.replica) ?? -1n) >= checkpoint.version
            ? Effect.void
            : load(o, replica, checkpoint),
        ),
      )
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
        latest = checkpoint
        yield* Effect.forEach(o.replicas, (r) => loadOne(r, checkpoint), {
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
    // A replica whose engine restarted on other weights gets the latest checkpoint again.
    const stale = yield* Queue.unbounded<string>()
    o.rotation.whenStale((name) => Queue.offerUnsafe(stale, name))
    yield* Effect.forkScoped(
      Stream.fromQueue(stale).pipe(
        Stream.runForEach((name) => {
          const replica = o.replicas.find((r) => r.replica === name)
          if (replica === undefined) return Effect.void
          if (latest === undefined)
            return Effect.logError(
              `engine bridge: ${name} holds weights the bridge did not load and the job has published none; it stays out of rotation`,
            )
          return Effect.andThen(
            Effect.logWarning(
              `engine bridge: ${name} no longer holds v${latest.version} (restarted?); loading it again`,
            ),
            Effect.forkScoped(loadOne(replica, latest)),
          )
        }),
      ),
    )
    const every = o.checkEveryMs ?? 30_000
    if (every > 0)
      yield* Effect.forkScoped(
        Effect.repeat(checkReplicas(o), Schedule.spaced(Duration.millis(every))),
      )
    const decode = (bytes: Uint8Array) =>
      Effect.try({
        try: () => fromBinary(WeightsAnnouncementSchema, bytes),
        catch: (e) => new Error(`undecodable announcement: ${String(e)}`),
      })
    const messages = yield* o.bus.subscribe(o.subjects.weights(o.job))
    const kv = yield* o.bus.kv(o.subjects.weightsBucket)
    const first = yield* kv.get(latestKey(o.job))
    if (Option.isSome(first)) yield* Effect.flatMap(decode(first.value.value), apply)
    return yield* messages.pipe(
      Stream.runForEach((m) =>
        decode(m.data).pipe(
          Effect.flatMap(apply),
          Effect.catch((e) => Effect.logWarning(`engine bridge: ${e.message}`)),
        ),
      ),
    )
  })
