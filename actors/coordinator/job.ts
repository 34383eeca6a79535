/**
 * One job's manager: waits for the job's lease, then runs the job from its ledger — admission,
 * end records, retries, cancel, the end — until the job is final. Each step commits the ledger
 * before anything it decided leaves the process (work items, events, the status), and acks the
 * trajectory records it read only after that commit, so a coordinator that dies at any point
 * is replaced by one that neither admits nor counts anything twice.
 */
import { randomBytes } from "node:crypto"
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Cause, Effect, Option, Queue, Schedule, Stream } from "effect"
import {
  EpisodeWorkItemSchema,
  ErrorCode,
  JobAdmittedSchema,
  JobEventSchema,
  JobSpecSchema,
  JobState,
  type JobStatus,
  JobStatusSchema,
  type TrajectoryRecord,
  TrajectoryRecordSchema,
  type WeightsAnnouncement,
  WeightsAnnouncementSchema,
} from "../../proto/index.ts"
import type { BusShape, KvBucket, Subjects, WorkItem } from "../../services/bus/index.ts"
import {
  isCancelRequested,
  isTerminalState,
  type JobStoreShape,
  laterSeq,
  type StoredJob,
} from "../../services/jobs/index.ts"
import { type JobLease, LeaseLost, tryAcquireLease } from "./lease.ts"
import {
  isFinalPhase,
  JobLedger,
  type LedgerError,
  newEffects,
  type OpenEpisode,
  type StepContext,
  stateChanged,
} from "./ledger.ts"
import type { CoordinatorMetrics } from "./metrics.ts"
import {
  type JobPlan,
  JobSpecInvalid,
  type JobTask,
  kindOf,
  learnsWeights,
  loadJobTasks,
  planOf,
  type ResolveImage,
  workItemMsgId,
  workItemOf,
} from "./plan.ts"

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

/** The job's durable consumer of its trajectory stream. */
export const coordinatorDurable = (jobId: string): string => `coordinator-${jobId}`

const weightsKey = (jobId: string) => `${jobId}.latest`

/** TrajectoryRecord's oneof: field 1 (chunk) starts with tag byte 0x0a, field 2 (end) with 0x12. */
const CHUNK_TAG = 0x0a

interface View {
  status: JobStatus
  revision: number
  deleted: boolean
}

const describe = (e: unknown): string =>
  e instanceof Error ? e.message : typeof e === "string" ? e : JSON.stringify(e)

const sameStatus = (a: JobStatus, b: JobStatus): boolean =>
  equals(JobStatusSchema, a, create(JobStatusSchema, { ...b, updatedUnixMs: a.updatedUnixMs }))

const decodeAnnouncement = (bytes: Uint8Array): WeightsAnnouncement | undefined => {
  try {
    return fromBinary(WeightsAnnouncementSchema, bytes)
  } catch {
    return undefined
  }
}

const randomSeed = (): bigint => randomBytes(8).readBigUInt64LE() || 1n

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
      const started = Date.now()
      const exit = yield* Effect.exit(
        Effect.scoped(runJob(ctx, jobId, lease.value, inbox, view, absorb, gen)).pipe(
          Effect.onInterrupt(() => (o.releaseOnShutdown ? lease.value.release : Effect.void)),
        ),
      )
      if (exit._tag === "Success") return
      // A tenure that ran a while was not part of a crash loop.
      failures = Date.now() - started > 30_000 ? 1 : failures + 1
      const lost = Cause.squash(exit.cause)
      yield* Effect.logWarning(
        `coordinator: job ${jobId}: ${describe(lost)}; ${failures > 1 ? `${failures} failures, ` : ""}trying again`,
      )
      yield* lease.value.release
      const backoff = Math.min(10_000, o.leaseTtlMs / 2, 100 * 2 ** Math.min(failures, 7))
      yield* Effect.sleep(`${Math.round(backoff)} millis`)
    }
  })

/** One lease tenure of a job, until it is final or deleted. Fails when the lease is lost. */
const runJob = (
  ctx: ManagerContext,
  jobId: string,
  lease: JobLease,
  inbox: Queue.Queue<JobInput>,
  view: View,
  absorb: (input: JobInput) => void,
  gen: number,
) =>
  Effect.gen(function* () {
    const o = ctx.options
    const { bus, store } = ctx
    const now = () => Date.now()

    const fresh = yield* store.getStored(jobId)
    if (Option.isNone(fresh)) {
      view.deleted = true
      yield* lease.remove
      return
    }
    absorb({ _tag: "Status", job: fresh.value })
    view.status = fresh.value.status
    view.revision = fresh.value.revision
    if (!isTerminalState(view.status.state))
      yield* Effect.logInfo(`coordinator: job ${jobId}: lease taken by ${o.instanceId}`)
    // From now on, also while the job's tasks load: a lapsed lease would let another take over.
    const lost = (reason: string) => Queue.offer(inbox, { _tag: "Lost", gen, reason })
    yield* lease.heartbeat.pipe(
      Effect.delay(`${Math.max(10, Math.floor(o.leaseTtlMs / 3))} millis`),
      Effect.forever,
      Effect.catch((e) => lost(describe(e))),
      Effect.forkScoped,
    )
    const spec = view.status.spec ?? create(JobSpecSchema, {})
    const defaults = { maxConcurrent: o.defaultMaxConcurrent }

    const loadTasks = Effect.gen(function* () {
      const cached = ctx.tasks.get(jobId)
      if (cached !== undefined) return cached
      const loaded = yield* loadJobTasks(spec, o.resolveImage)
      ctx.tasks.set(jobId, loaded)
      return loaded
    })

    let ledger: JobLedger
    let plan: JobPlan
    let tasks: ReadonlyArray<JobTask> = []
    const admission = newEffects()
    const stored = lease.ledger()
    if (stored === undefined) {
      if (isTerminalState(view.status.state)) {
        yield* lease.remove
        return
      }
      const admitted = yield* Effect.result(
        Effect.gen(function* () {
          const kind = yield* kindOf(spec)
          const loaded = yield* loadTasks
          return { kind, loaded }
        }),
      )
      if (admitted._tag === "Failure") {
        const e = admitted.failure
        const error: LedgerError = {
          code: e instanceof JobSpecInvalid ? ErrorCode.INVALID_ARGUMENT : ErrorCode.UNAVAILABLE,
          message: e.message,
        }
        plan = planOf(jobId, spec, "eval", 0, defaults)
        ledger = JobLedger.start([], 1, 0n)
        ledger.phase = "failed"
        ledger.error = error
        ledger.emit(
          jobId,
          stateChanged(JobState.FAILED, view.status.state, error),
          now(),
          admission,
        )
        yield* Effect.logWarning(`coordinator: job ${jobId} failed at admission: ${e.message}`)
      } else {
        const { kind, loaded } = admitted.success
        tasks = loaded
        plan = planOf(jobId, spec, kind, loaded.length, defaults)
        ledger = JobLedger.start(
          loaded.map((t) => t.key),
          plan.groupSize,
          spec.seed || randomSeed(),
        )
        ledger.emit(
          jobId,
          {
            case: "admitted",
            value: create(JobAdmittedSchema, {
              episodesTotal: plan.total ?? 0,
              tasks: loaded.length,
            }),
          },
          now(),
          admission,
        )
        ledger.emit(
          jobId,
          stateChanged(JobState.RUNNING, view.status.state, undefined),
          now(),
          admission,
        )
        yield* Effect.logInfo(
          `coordinator: job ${jobId} admitted: ${kind}, ${loaded.length} tasks × ${plan.groupSize}${plan.total === undefined ? "" : ` = ${plan.total} episodes`}`,
        )
      }
    } else {
      ledger = JobLedger.fromData(stored)
      const kind = yield* Effect.result(kindOf(spec))
      plan = planOf(
        jobId,
        spec,
        kind._tag === "Success" ? kind.success : "eval",
        ledger.taskKeys.length,
        defaults,
      )
      yield* Effect.logInfo(
        `coordinator: job ${jobId} resumed: ${ledger.nextIndex} admitted, ${ledger.open.size} open, ${ledger.finished} finished, ${ledger.failed} failed, ${ledger.unverifiable} unverifiable`,
      )
    }

    // The train job's latest announced weights: its learner step and policy version.
    let latest: WeightsAnnouncement | undefined
    if (learnsWeights(plan.kind)) {
      const found = yield* ctx.weights.get(weightsKey(jobId))
      if (Option.isSome(found)) latest = decodeAnnouncement(found.value.value)
    }
    const policyVersion = () => latest?.policyVersion ?? 0n

    const publishItems = (issue: ReadonlyArray<OpenEpisode>) =>
      Effect.forEach(
        issue,
        (open) =>
          bus.jsPublish(
            o.subjects.episodes,
            toBinary(EpisodeWorkItemSchema, workItemOf(plan, spec, ledger.seed, tasks, open)),
            { msgId: workItemMsgId(jobId, open.index, open.attempt) },
          ),
        { discard: true },
      )

    /** Commits the ledger; new events get their seqs first (from the status's last_event_seq). */
    const commit = (next: JobLedger) =>
      Effect.gen(function* () {
        if (next.outbox.events.length > 0 && next.outbox.seqFrom === undefined) {
          const found = yield* store.getStored(jobId)
          const last = Option.isSome(found) ? found.value.status.lastEventSeq : 0n
          next.outbox.seqFrom = Number(last) + 1
        }
        yield* lease.commit(next.toData())
      })

    let restoredOutbox = stored !== undefined
    /**
     * Publishes the outbox's events, then stores the status derived from the ledger with
     * last_event_seq moved past them (compare-and-set). Events are numbered from the outbox's
     * seqFrom (fixed at commit time), and, as in the gateway's job store, a number another
     * writer took (a duplicate Nats-Msg-Id) passes to the next. After a restart, a duplicate at
     * the recorded number is this outbox's own publish from before the crash, and a status
     * already past the outbox means the crash came after both.
     */
    const sync = Effect.gen(function* () {
      let publishedThrough: bigint | undefined
      for (;;) {
        const found = yield* store.getStored(jobId)
        if (Option.isNone(found)) {
          view.deleted = true
          return
        }
        const { status, revision } = found.value
        absorb({ _tag: "Status", job: found.value })
        if (isTerminalState(status.state) && !isFinalPhase(ledger.phase)) return
        const events = ledger.outbox.events
        if (publishedThrough === undefined && events.length > 0) {
          const from = ledger.outbox.seqFrom ?? Number(status.lastEventSeq) + 1
          const recovering = restoredOutbox && ledger.outbox.seqFrom !== undefined
          if (recovering && status.lastEventSeq >= BigInt(from + events.length - 1)) {
            publishedThrough = status.lastEventSeq
          } else {
            let seq = BigInt(from)
            let probed = false
            for (const event of events) {
              for (;;) {
                const ack = yield* store.publishEvent(create(JobEventSchema, { ...event, seq }))
                if (!ack.duplicate || (recovering && !probed)) break
                probed = true
                seq += 1n
              }
              publishedThrough = seq
              seq += 1n
            }
          }
        }
        restoredOutbox = false
        const through = publishedThrough ?? 0n
        const next = ledger.statusOver(status, plan, {
          lastEventSeq: laterSeq(status.lastEventSeq, through),
          policyVersion: learnsWeights(plan.kind) ? latest?.policyVersion : undefined,
          learnerStep: learnsWeights(plan.kind) ? latest?.step : undefined,
          now: now(),
        })
        if (!sameStatus(status, next)) {
          const written = yield* store.compareAndSet(jobId, next, revision).pipe(
            Effect.map(Option.some),
            Effect.catchTag("KvConflict", () => Effect.succeed(Option.none<number>())),
          )
          if (Option.isNone(written)) continue
          view.status = next
          view.revision = Math.max(view.revision, written.value)
        }
        // Persisted with the next commit; until then a restart finds them stored (see above).
        ledger.outbox = { seqFrom: undefined, events: [] }
        return
      }
    })

    const record = (fx: ReturnType<typeof newEffects>) =>
      Effect.sync(() => {
        const m = ctx.metrics
        if (fx.admitted > 0) m.admitted.inc(fx.admitted)
        if (fx.retried > 0) m.retried.inc(fx.retried)
        for (const [result, n] of Object.entries(fx.finished))
          if (n > 0) m.finished.inc({ result }, n)
      })

    // ---- recovery: the first commit (admission), unpublished events, recent work items ----
    if (admission.changed) yield* commit(ledger)
    // The admission's events, or those a previous coordinator committed and may not have sent.
    yield* sync
    if (stored !== undefined && ledger.phase === "running") {
      const loaded = yield* Effect.result(loadTasks)
      const keys = loaded._tag === "Success" ? loaded.success.map((t) => t.key) : []
      const missing = ledger.taskKeys.filter((k) => !keys.includes(k))
      if (loaded._tag === "Failure" || missing.length > 0) {
        const message =
          loaded._tag === "Failure"
            ? loaded.failure.message
            : `tasks of the job are gone from ${spec.taskSet}: ${missing.slice(0, 5).join(", ")}`
        const fx = newEffects()
        ledger.finish(plan, "failed", { code: ErrorCode.UNAVAILABLE, message }, now(), fx)
        yield* commit(ledger)
        yield* sync
      } else {
        // In the ledger's order, which is the order the job was admitted with.
        const byKey = new Map(loaded.success.map((t) => [t.key, t]))
        tasks = ledger.taskKeys.flatMap((k) => {
          const t = byKey.get(k)
          return t === undefined ? [] : [t]
        })
      }
    }
    if (ledger.phase === "running") {
      const recent = [...ledger.open.values()].filter(
        (e) => now() - e.issuedAtMs < o.republishWindowMs,
      )
      // Ours to re-publish: their first publish may have died with the last coordinator; the
      // work queue's duplicate window drops the ones that were stored.
      yield* publishItems(recent)
    }
    if (isFinalPhase(ledger.phase) || isTerminalState(view.status.state) || view.deleted) {
      if (isTerminalState(view.status.state) || view.deleted) yield* lease.remove
      return
    }

    // ---- inputs ----
    yield* bus.ensureConsumer({
      stream: o.subjects.trajectoriesStream,
      durable: coordinatorDurable(jobId),
      filterSubject: o.subjects.trajectories(jobId),
      ackWaitMs: o.ackWaitMs,
      maxDeliver: -1,
    })
    yield* Stream.runForEach(
      bus.consume(o.subjects.trajectoriesStream, coordinatorDurable(jobId), { maxInFlight: 1024 }),
      (item) => Queue.offer(inbox, { _tag: "Record", gen, item }),
    ).pipe(
      Effect.andThen(lost("the trajectory consumer ended")),
      Effect.catch((e) => lost(`trajectory consumer: ${describe(e)}`)),
      Effect.forkScoped,
    )
    yield* Queue.offer(inbox, { _tag: "Tick", gen }).pipe(
      Effect.repeat(Schedule.spaced(`${o.tickMs} millis`)),
      Effect.forkScoped,
    )
    if (learnsWeights(plan.kind)) {
      const announcements = yield* ctx.weights.watch(weightsKey(jobId))
      yield* Stream.runForEach(announcements, (e) =>
        e.operation === "put"
          ? Effect.suspend(() => {
              const announcement = decodeAnnouncement(e.value)
              return announcement === undefined
                ? Effect.void
                : Queue.offer(inbox, { _tag: "Weights", gen, announcement })
            })
          : Effect.void,
      ).pipe(
        Effect.catch((e) => lost(`weights watch: ${describe(e)}`)),
        Effect.forkScoped,
      )
    }

    // ---- the job's life: one step per batch of inputs ----
    for (;;) {
      const inputs = yield* Queue.takeAll(inbox)
      const draft = ledger.clone()
      const fx = newEffects()
      const acks: WorkItem[] = []
      const poison: WorkItem[] = []
      let statusSeen = false
      for (const input of inputs) {
        switch (input._tag) {
          case "Status":
          case "Deleted":
            absorb(input)
            statusSeen = true
            break
          case "Record": {
            if (input.gen !== gen) break
            const data = input.item.data
            if (data.length > 0 && data[0] === CHUNK_TAG) {
              acks.push(input.item)
              break
            }
            let decoded: TrajectoryRecord
            try {
              decoded = fromBinary(TrajectoryRecordSchema, data)
            } catch {
              poison.push(input.item)
              break
            }
            if (decoded.record.case === "end")
              draft.recordEnd(plan, decoded.record.value, now(), fx)
            acks.push(input.item)
            break
          }
          case "Weights":
            if (input.gen !== gen) break
            if (latest === undefined || input.announcement.policyVersion > latest.policyVersion) {
              latest = input.announcement
              statusSeen = true
            }
            break
          case "Tick":
            break
          case "Lost":
            if (input.gen === gen) return yield* new LeaseLost({ jobId, reason: input.reason })
            break
        }
      }
      if (view.deleted) {
        yield* lease.remove
        return
      }
      if (isTerminalState(view.status.state) && !isFinalPhase(draft.phase)) {
        // Ended by someone else (e.g. cancelled without waiting): nothing more to run or count.
        yield* Effect.forEach(acks, (i) => Effect.ignore(i.ack), { discard: true })
        yield* lease.remove
        yield* Effect.logInfo(
          `coordinator: job ${jobId} ended elsewhere (${JobState[view.status.state]})`,
        )
        return
      }
      const stepContext: StepContext = {
        now: now(),
        cancelRequested: isCancelRequested(view.status)
          ? {
              code: ErrorCode.CANCELLED,
              message: view.status.error?.message || "cancelled",
            }
          : undefined,
        learnerStep: latest === undefined ? undefined : Number(latest.step),
        policyVersion: policyVersion(),
        cancelGraceMs: o.cancelGraceMs,
        episodeTimeoutMs: o.episodeTimeoutMs,
      }
      draft.settle(plan, stepContext, fx)
      if (fx.changed) {
        yield* commit(draft)
        ledger = draft
      }
      yield* publishItems(fx.issue)
      if (fx.changed || statusSeen || ledger.outbox.events.length > 0) yield* sync
      yield* Effect.forEach(acks, (i) => Effect.ignore(i.ack), { discard: true })
      yield* Effect.forEach(poison, (i) => Effect.ignore(i.term("undecodable record")), {
        discard: true,
      })
      yield* record(fx)
      if (isFinalPhase(ledger.phase) && isTerminalState(view.status.state)) {
        yield* Effect.logInfo(
          `coordinator: job ${jobId} ${ledger.phase}: ${ledger.finished} finished, ${ledger.failed} failed, ${ledger.unverifiable} unverifiable, ${ledger.retried} retried`,
        )
        yield* lease.remove
        return
      }
    }
  })
