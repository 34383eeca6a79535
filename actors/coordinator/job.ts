/**
 * One job's manager: waits for the job's lease, then runs the job from its ledger (a tenure,
 * tenure.ts) until the job is final; a tenure that fails gives the lease back and the manager
 * tries again. A coordinator that dies at any point is replaced by one that neither admits nor
 * counts anything twice.
 */
import { Cause, Clock, Effect, Option, Queue } from "effect"
import type { JobStatus, WeightsAnnouncement } from "../../proto/index.ts"
import type { BusShape, KvBucket, Subjects, WorkItem } from "../../services/bus/index.ts"
import { isTerminalState, type JobStoreShape, type StoredJob } from "../../services/jobs/index.ts"
import { type JobLease, tryAcquireLease } from "./lease.ts"
import type { CoordinatorMetrics } from "./metrics.ts"
import type { JobTask, ResolveImage } from "./plan.ts"
import { describe, runTenure } from "./tenure.ts"

export interface ManagerOptions {
  readonly subjects: Subjects
  readonly instanceId: string
  readonly resolveImage: ResolveImage
  readonly leaseTtlMs: number
  readonly tickMs: number
  readonly ackWaitMs: number
  readonly cancelGraceMs: number
  readonly defaultMaxConcurrent: number
  readonly episodeTimeoutMs: number
  readonly republishWindowMs: number
  readonly releaseOnShutdown: boolean
}

export interface ManagerContext {
  readonly bus: BusShape
  readonly store: JobStoreShape
  readonly leases: KvBucket
  readonly weights: KvBucket
  readonly metrics: CoordinatorMetrics
  readonly options: ManagerOptions
  /** Wired tasks per job, loaded once per process. */
  readonly tasks: Map<string, ReadonlyArray<JobTask>>
}

/** What reaches a job's manager. `gen` tells inputs of one lease tenure from a later one's. */
export type JobInput =
  | { readonly _tag: "Status"; readonly job: StoredJob }
  | { readonly _tag: "Deleted" }
  | { readonly _tag: "Record"; readonly gen: number; readonly item: WorkItem }
  | { readonly _tag: "Weights"; readonly gen: number; readonly announcement: WeightsAnnouncement }
  | { readonly _tag: "Tick"; readonly gen: number }
  | { readonly _tag: "Lost"; readonly gen: number; readonly reason: string }

export interface View {
  status: JobStatus
  revision: number
  deleted: boolean
}

/**
 * Runs until the job is final (or deleted): takes the lease when it is free, runs the job, and
 * after a failure gives the lease back and tries again.
 */
export const manageJob = (
  ctx: ManagerContext,
  jobId: string,
  inbox: Queue.Queue<JobInput>,
  first: StoredJob,
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const o = ctx.options
    const view: View = { status: first.status, revision: first.revision, deleted: false }
    const absorb = (input: JobInput) => {
      if (input._tag === "Status" && input.job.revision > view.revision) {
        view.status = input.job.status
        view.revision = input.job.revision
      } else if (input._tag === "Deleted") view.deleted = true
    }
    let gen = 0
    let failures = 0
    for (;;) {
      if (view.deleted || isTerminalState(view.status.state)) return
      const lease = yield* tryAcquireLease(ctx.leases, jobId, o.instanceId, o.leaseTtlMs).pipe(
        Effect.catch((e) =>
          Effect.as(
            Effect.logWarning(`coordinator: job ${jobId}: lease: ${describe(e)}`),
            Option.none<JobLease>(),
          ),
        ),
      )
      if (Option.isNone(lease)) {
        // Held by another coordinator: look again when it may have expired, or on news.
        const news = yield* Effect.timeoutOption(
          Queue.take(inbox),
          `${Math.max(10, Math.floor(o.leaseTtlMs / 3))} millis`,
        )
        if (Option.isSome(news)) absorb(news.value)
        continue
      }
      gen += 1
      const started = yield* Clock.currentTimeMillis
      const exit = yield* Effect.exit(
        Effect.scoped(runTenure(ctx, jobId, lease.value, inbox, view, absorb, gen)).pipe(
          Effect.onInterrupt(() => (o.releaseOnShutdown ? lease.value.release : Effect.void)),
        ),
      )
      if (exit._tag === "Success") return
      // A tenure that ran a while was not part of a crash loop.
      failures = (yield* Clock.currentTimeMillis) - started > 30_000 ? 1 : failures + 1
      const lost = Cause.squash(exit.cause)
      yield* Effect.logWarning(
        `coordinator: job ${jobId}: ${describe(lost)}; ${failures > 1 ? `${failures} failures, ` : ""}trying again`,
      )
      yield* lease.value.release
      const backoff = Math.min(10_000, o.leaseTtlMs / 2, 100 * 2 ** Math.min(failures, 7))
      yield* Effect.sleep(`${Math.round(backoff)} millis`)
    }
  })
