/**
 * Job pools: an actor that serves whichever jobs need it (a learner, a buffer) claims each job
 * with a lease in a KV bucket, one holder per job across every replica, keeps it by heartbeat,
 * and gives it back when the job ends or the process stops. A holder that dies is replaced
 * once its lease lapses; a job whose run failed waits a cool-down before anyone retries it here.
 */
import { randomUUID } from "node:crypto"
import { Cause, Clock, Deferred, Effect, Exit, Option, Schedule, Semaphore, Stream } from "effect"
import type { JobStatus } from "../../proto/index.ts"
import {
  BusClosed,
  type BusError,
  type BusShape,
  type KvBucket,
  type Subjects,
} from "../../services/bus/index.ts"
import {
  isTerminalState,
  type JobStoreShape,
  jobStoreFor,
  type StoredJob,
} from "../../services/jobs/index.ts"
import { type JobLease, tryAcquireLease } from "../coordinator/index.ts"

/** What a pooled actor's process says about itself (`t1 actor buffer|learner` without --job). */
export interface PoolOptions {
  readonly subjects: Subjects
  /** Names this process in leases; default a random UUID. */
  readonly owner?: string
  /** A job's lease lapses this long after its holder's last heartbeat (default 15 s). */
  readonly leaseTtlMs?: number
  /** Jobs served at once by this process. */
  readonly maxJobs?: number
}

/**
 * The lease side of a pooled actor named `name`: the job store, its lease bucket
 * `<prefix>-<name>-leases`, and who this process is (owner, lease TTL, jobs at once).
 */
export const poolMembership = (
  bus: BusShape,
  o: PoolOptions,
  name: string,
  defaultMaxJobs: number,
) =>
  Effect.gen(function* () {
    return {
      name,
      store: yield* jobStoreFor(bus, o.subjects),
      leases: yield* bus.kv(`${o.subjects.prefix}-${name}-leases`),
      owner: o.owner ?? randomUUID(),
      ttlMs: o.leaseTtlMs ?? 15_000,
      maxJobs: o.maxJobs ?? defaultMaxJobs,
    }
  })

export interface JobPoolOptions<R> {
  /** Names the pool in logs ("learner", "buffer"). */
  readonly name: string
  readonly store: JobStoreShape
  readonly leases: KvBucket
  /** This process in the leases. */
  readonly owner: string
  /** A lease lapses this long after its holder's last heartbeat. */
  readonly ttlMs: number
  /** Jobs this process runs at once. */
  readonly maxJobs: number
  /** After a run fails, this process leaves the job alone this long (default 30 s). */
  readonly coolDownMs?: number
  /** Which non-terminal jobs the pool serves. */
  readonly wants: (status: JobStatus) => boolean
  /**
   * Serves one job. Interrupted when the job reaches a terminal state or the lease is lost.
   * Returning means the work is done: the lease is kept (so no other replica redoes it) until
   * the job ends.
   */
  readonly run: (job: StoredJob) => Effect.Effect<void, unknown, R>
  /** Running jobs changed (metrics). */
  readonly onRunning?: (jobs: number) => void
}

interface Running {
  readonly ended: Deferred.Deferred<void>
}

const describe = (e: unknown): string =>
  e instanceof Error
    ? e.message
    : typeof e === "object" && e !== null
      ? JSON.stringify(e)
      : String(e)

/** Runs the pool until interrupted; leases held then are released for another replica. */
export const runJobPool = <R>(o: JobPoolOptions<R>): Effect.Effect<never, BusError, R> =>
  Effect.scoped(
    Effect.gen(function* () {
      const scope = yield* Effect.scope
      const candidates = new Map<string, StoredJob>()
      const running = new Map<string, Running>()
      const coolUntil = new Map<string, number>()
      const coolDownMs = o.coolDownMs ?? 30_000
      const report = () => o.onRunning?.(running.size)

      const serve = (job: StoredJob, lease: JobLease, slot: Running) =>
        Effect.gen(function* () {
          yield* Effect.logInfo(`${o.name}: took job ${job.jobId}`)
          const heartbeat = lease.heartbeat.pipe(
            Effect.repeat(Schedule.spaced(`${Math.max(50, Math.floor(o.ttlMs / 3))} millis`)),
            Effect.andThen(Effect.never),
          )
          const work = o
            .run(job)
            .pipe(
              Effect.andThen(
                Effect.logInfo(`${o.name}: job ${job.jobId} done here; holding it until it ends`),
              ),
              Effect.andThen(Deferred.await(slot.ended)),
            )
          const outcome = yield* Effect.raceAllFirst([
            Effect.map(work, () => "done" as const),
            Effect.map(Deferred.await(slot.ended), () => "ended" as const),
            heartbeat,
          ]).pipe(Effect.exit)
          const ended = Option.isSome(yield* Deferred.poll(slot.ended))
          // Failures and defects alike: a run that dies must not leave the lease held silently.
          if (Exit.isFailure(outcome) && !Cause.hasInterruptsOnly(outcome.cause)) {
            coolUntil.set(job.jobId, (yield* Clock.currentTimeMillis) + coolDownMs)
            yield* Effect.logWarning(
              `${o.name}: job ${job.jobId} stopped here: ${Cause.pretty(outcome.cause)}`,
            )
          }
          if (ended) {
            yield* lease.remove
            yield* Effect.logInfo(`${o.name}: job ${job.jobId} ended`)
          } else yield* lease.release
        }).pipe(
          Effect.onInterrupt(() => lease.release),
          Effect.ensuring(
            Effect.sync(() => {
              running.delete(job.jobId)
              report()
            }),
          ),
        )

      // One claim pass at a time: a job must not be taken twice by this owner.
      const lock = yield* Semaphore.make(1)
      const claim = lock.withPermits(1)(
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          for (const job of [...candidates.values()]) {
            if (running.size >= o.maxJobs) return
            if (running.has(job.jobId) || (coolUntil.get(job.jobId) ?? 0) > now) continue
            const lease = yield* tryAcquireLease(o.leases, job.jobId, o.owner, o.ttlMs)
            if (Option.isNone(lease)) continue
            const slot: Running = { ended: yield* Deferred.make<void>() }
            running.set(job.jobId, slot)
            report()
            yield* serve(job, lease.value, slot).pipe(Effect.forkIn(scope))
          }
        }).pipe(Effect.catch((e) => Effect.logWarning(`${o.name}: claiming jobs: ${describe(e)}`))),
      )

      const changes = yield* o.store.storedChanges
      const follow = Stream.runForEach(changes, (change) =>
        Effect.gen(function* () {
          const jobId = change._tag === "Deleted" ? change.jobId : change.job.jobId
          const over = change._tag === "Deleted" || isTerminalState(change.job.status.state)
          if (over || (change._tag === "Put" && !o.wants(change.job.status))) {
            candidates.delete(jobId)
            const slot = running.get(jobId)
            if (slot !== undefined && over) yield* Deferred.succeed(slot.ended, undefined)
            return
          }
          if (change._tag === "Put") candidates.set(jobId, change.job)
          yield* claim
        }),
      ).pipe(Effect.andThen(Effect.fail(new BusClosed({ operation: `${o.name} job watch` }))))
      // Leases held elsewhere lapse when their holder dies: look again now and then.
      const retry = claim.pipe(
        Effect.repeat(Schedule.spaced(`${Math.max(50, Math.floor(o.ttlMs / 2))} millis`)),
        Effect.andThen(Effect.never),
      )
      return yield* Effect.raceFirst(follow, retry)
    }),
  )
