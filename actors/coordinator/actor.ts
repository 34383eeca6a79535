import { randomUUID } from "node:crypto"
import { Effect, Queue, Stream } from "effect"
import { JobState } from "../../proto/index.ts"
import { Bus, type BusError, type Subjects } from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import {
  isCancelRequested,
  isTerminalState,
  type JobStoreShape,
  jobStoreFor,
} from "../../services/jobs/index.ts"
import { Metrics } from "../../services/metrics/index.ts"
import { resolveTaskImage } from "../sandbox/index.ts"
import { type JobInput, type ManagerContext, manageJob } from "./job.ts"
import { coordinatorBucket } from "./lease.ts"
import { coordinatorMetrics } from "./metrics.ts"
import type { JobTask, ResolveImage } from "./plan.ts"

export interface CoordinatorOptions {
  readonly subjects: Subjects
  /** Names this coordinator in leases; default a random UUID per process. */
  readonly instanceId?: string
  /** The image a task's sandbox runs; default resolveTaskImage (needs a Docker engine). */
  readonly resolveImage?: ResolveImage
  /** A job's lease lapses this long after its holder's last heartbeat; default 15 s. */
  readonly leaseTtlMs?: number
  /** Period of the job loop's timer (expiry, cancel grace); default 1 s. */
  readonly tickMs?: number
  /** Ack wait of the per-job trajectory consumer (redelivery after a crash); default 30 s. */
  readonly ackWaitMs?: number
  /** How long a cancelled job waits for its running episodes; default 60 s. */
  readonly cancelGraceMs?: number
  /** max_concurrent_episodes when the spec says 0; default 16. */
  readonly defaultMaxConcurrent?: number
  /**
   * An attempt without an end record for this long counts as an infra failure (its work item
   * may have been dropped after the sampler's redeliveries); default 3 h, 0: never.
   */
  readonly episodeTimeoutMs?: number
  /**
   * Open attempts issued within this window are re-published by a coordinator that takes a
   * job over (their first publish may have died with the last one); must stay inside the
   * work queue's duplicate window (10 min). Default 5 min.
   */
  readonly republishWindowMs?: number
  /** Give leases back on shutdown, so another coordinator takes over at once; default true. */
  readonly releaseOnShutdown?: boolean
  /** The job store; default the JobStore service for these subjects, else one over the bus. */
  readonly store?: JobStoreShape
}

const stateLabel = (state: JobState, cancelling: boolean): string =>
  cancelling ? "cancelling" : (JobState[state] ?? "unspecified").toLowerCase()

const STATE_LABELS = [
  "unspecified",
  "pending",
  "running",
  "cancelling",
  "succeeded",
  "failed",
  "cancelled",
]

/**
 * The coordinator actor: watches the job store, and for each job that is not final runs a
 * manager that competes for the job's lease; the holder expands the job into episode work items
 * on `<prefix>.episodes` (staleness-bounded for training), follows its trajectory stream,
 * retries infra failures, keeps the job's status and events, evaluates eval jobs (resolved rate,
 * pass@k) and ends the job. Any number of coordinators may run: each job has one at a time.
 */
export const runCoordinator = (
  options: CoordinatorOptions,
): Effect.Effect<never, BusError, Bus | Metrics> =>
  Effect.scoped(
    Effect.gen(function* () {
      const bus = yield* Bus
      const metrics = coordinatorMetrics(yield* Metrics)
      const { subjects } = options
      yield* ensureSamplerStreams(bus, subjects)
      const store = options.store ?? (yield* jobStoreFor(bus, subjects))
      const ctx: ManagerContext = {
        bus,
        store,
        leases: yield* bus.kv(coordinatorBucket(subjects)),
        weights: yield* bus.kv(subjects.weightsBucket),
        metrics,
        options: {
          subjects,
          instanceId: options.instanceId ?? randomUUID(),
          resolveImage:
            options.resolveImage ?? ((task) => Effect.map(resolveTaskImage(task), (r) => r.image)),
          leaseTtlMs: options.leaseTtlMs ?? 15_000,
          tickMs: options.tickMs ?? 1000,
          ackWaitMs: options.ackWaitMs ?? 30_000,
          cancelGraceMs: options.cancelGraceMs ?? 60_000,
          defaultMaxConcurrent: options.defaultMaxConcurrent ?? 16,
          episodeTimeoutMs: options.episodeTimeoutMs ?? 3 * 60 * 60_000,
          republishWindowMs: options.republishWindowMs ?? 5 * 60_000,
          releaseOnShutdown: options.releaseOnShutdown ?? true,
        },
        tasks: new Map<string, ReadonlyArray<JobTask>>(),
      }
      const managers = new Map<string, Queue.Queue<JobInput>>()
      const states = new Map<string, string>()
      const showStates = () => {
        const counts = new Map(STATE_LABELS.map((s) => [s, 0]))
        for (const s of states.values()) counts.set(s, (counts.get(s) ?? 0) + 1)
        for (const [state, n] of counts) metrics.jobs.set({ state }, n)
      }
      showStates()

      const changes = yield* store.storedChanges
      yield* Effect.logInfo(
        `coordinator: ${ctx.options.instanceId} watching ${subjects.jobsBucket}`,
      )
      return yield* Stream.runForEach(changes, (change) =>
        Effect.gen(function* () {
          if (change._tag === "Deleted") {
            states.delete(change.jobId)
            showStates()
            const inbox = managers.get(change.jobId)
            if (inbox !== undefined) yield* Queue.offer(inbox, { _tag: "Deleted" })
            return
          }
          const { job } = change
          states.set(job.jobId, stateLabel(job.status.state, isCancelRequested(job.status)))
          showStates()
          const inbox = managers.get(job.jobId)
          if (inbox !== undefined) {
            yield* Queue.offer(inbox, { _tag: "Status", job })
            return
          }
          if (isTerminalState(job.status.state)) return
          const fresh = yield* Queue.unbounded<JobInput>()
          managers.set(job.jobId, fresh)
          yield* manageJob(ctx, job.jobId, fresh, job).pipe(
            Effect.ensuring(Effect.sync(() => managers.delete(job.jobId))),
            Effect.forkScoped,
          )
        }),
      ).pipe(Effect.andThen(Effect.never))
    }),
  )
