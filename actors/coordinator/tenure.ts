/**
 * One lease tenure of a job, in named steps: take the lease over (fresh status, heartbeat),
 * admit or resume the job's ledger, recover what a previous holder may have left half-done,
 * follow the job's inputs, then apply each batch of inputs until the job is final or deleted.
 * Every step commits the ledger before anything it decided leaves the process (work items,
 * events, the status), and acks the trajectory records it read only after that commit.
 */
import { randomBytes } from "node:crypto"
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Clock, Effect, Option, Queue, Schedule, Stream } from "effect"
import {
  EpisodeWorkItemSchema,
  ErrorCode,
  JobAdmittedSchema,
  JobEventSchema,
  type JobSpec,
  JobSpecSchema,
  JobState,
  type JobStatus,
  JobStatusSchema,
  type TrajectoryRecord,
  TrajectoryRecordSchema,
  type WeightsAnnouncement,
  WeightsAnnouncementSchema,
} from "../../proto/index.ts"
import type { WorkItem } from "../../services/bus/index.ts"
import { ensureJobEpisodes, jobEpisodesSubject } from "../../services/episodes/index.ts"
import { isCancelRequested, isTerminalState, laterSeq } from "../../services/jobs/index.ts"
import type { JobInput, ManagerContext, View } from "./job.ts"
import { type JobLease, LeaseLost } from "./lease.ts"
import {
  isFinalPhase,
  JobLedger,
  type LedgerError,
  newEffects,
  type OpenEpisode,
  type StepContext,
  type StepEffects,
  stateChanged,
} from "./ledger.ts"
import {
  type JobPlan,
  JobSpecInvalid,
  type JobTask,
  type JobTasksUnavailable,
  kindOf,
  learnsWeights,
  loadJobTasks,
  planOf,
  workItemMsgId,
  workItemOf,
} from "./plan.ts"

/** The job's durable consumer of its trajectory stream. */
export const coordinatorDurable = (jobId: string): string => `coordinator-${jobId}`

const weightsKey = (jobId: string) => `${jobId}.latest`

/** TrajectoryRecord's oneof: field 1 (chunk) starts with tag byte 0x0a, field 2 (end) with 0x12. */
const CHUNK_TAG = 0x0a

export const describe = (e: unknown): string =>
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

/** What a tenure holds and changes as it runs. */
interface Tenure {
  readonly ctx: ManagerContext
  readonly jobId: string
  readonly lease: JobLease
  readonly view: View
  readonly absorb: (input: JobInput) => void
  /** Tells this tenure's inputs from a later one's. */
  readonly gen: number
  readonly spec: JobSpec
  /** The job's tasks (loaded once per process). */
  readonly loadTasks: Effect.Effect<ReadonlyArray<JobTask>, JobSpecInvalid | JobTasksUnavailable>
  /** Resumed from a ledger a previous tenure committed. */
  readonly resumed: boolean
  ledger: JobLedger
  plan: JobPlan
  tasks: ReadonlyArray<JobTask>
  /** A train job's latest announced weights: its learner step and policy version. */
  latest: WeightsAnnouncement | undefined
  /** The outbox came from the stored ledger and may have been published before a crash. */
  restoredOutbox: boolean
}

/**
 * One lease tenure of a job, until it is final or deleted. Fails with LeaseLost when the lease
 * is lost; any other failure ends the tenure too, and the manager tries again.
 */
export const runTenure = (
  ctx: ManagerContext,
  jobId: string,
  lease: JobLease,
  inbox: Queue.Queue<JobInput>,
  view: View,
  absorb: (input: JobInput) => void,
  gen: number,
) =>
  Effect.gen(function* () {
    const lost = (reason: string) => Queue.offer(inbox, { _tag: "Lost", gen, reason })
    if (!(yield* takeOver(ctx, jobId, lease, view, absorb, lost))) return
    const t = yield* admitOrResume(ctx, jobId, lease, view, absorb, gen)
    if (t === undefined) return
    if ((yield* recover(t)) === "over") return
    yield* followInputs(t, inbox, lost)
    for (;;) {
      const inputs = yield* Queue.takeAll(inbox)
      if ((yield* applyInputs(t, inputs)) === "over") return
    }
  })

/** Reads the job fresh and starts the heartbeat; false when the job is gone. */
const takeOver = (
  ctx: ManagerContext,
  jobId: string,
  lease: JobLease,
  view: View,
  absorb: (input: JobInput) => void,
  lost: (reason: string) => Effect.Effect<unknown>,
) =>
  Effect.gen(function* () {
    const o = ctx.options
    const fresh = yield* ctx.store.getStored(jobId)
    if (Option.isNone(fresh)) {
      view.deleted = true
      yield* lease.remove
      return false
    }
    absorb({ _tag: "Status", job: fresh.value })
    view.status = fresh.value.status
    view.revision = fresh.value.revision
    if (!isTerminalState(view.status.state))
      yield* Effect.logInfo(`coordinator: job ${jobId}: lease taken by ${o.instanceId}`)
    // From now on, also while the job's tasks load: a lapsed lease would let another take over.
    yield* lease.heartbeat.pipe(
      Effect.delay(`${Math.max(10, Math.floor(o.leaseTtlMs / 3))} millis`),
      Effect.forever,
      Effect.catch((e) => lost(describe(e))),
      Effect.forkScoped,
    )
    return true
  })

/**
 * A job without a ledger is admitted (its kind checked, its tasks loaded, the plan made, the
 * admitted and RUNNING events emitted) or failed at admission; a job with one is resumed from
 * it. Undefined when a terminal job without a ledger is left alone.
 */
const admitOrResume = (
  ctx: ManagerContext,
  jobId: string,
  lease: JobLease,
  view: View,
  absorb: (input: JobInput) => void,
  gen: number,
) =>
  Effect.gen(function* () {
    const o = ctx.options
    const spec = view.status.spec ?? create(JobSpecSchema, {})
    const defaults = { maxConcurrent: o.defaultMaxConcurrent }
    const loadTasks = Effect.gen(function* () {
      const cached = ctx.tasks.get(jobId)
      if (cached !== undefined) return cached
      const loaded = yield* loadJobTasks(spec, o.resolveImage)
      ctx.tasks.set(jobId, loaded)
      return loaded
    })
    const now = yield* Clock.currentTimeMillis
    const stored = lease.ledger()
    const admission = newEffects()
    let ledger: JobLedger
    let plan: JobPlan
    let tasks: ReadonlyArray<JobTask> = []
    if (stored === undefined) {
      if (isTerminalState(view.status.state)) {
        yield* lease.remove
        return undefined
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
        ledger.emit(jobId, stateChanged(JobState.FAILED, view.status.state, error), now, admission)
        yield* Effect.logWarning(`coordinator: job ${jobId} failed at admission: ${e.message}`)
      } else {
        const { kind, loaded } = admitted.success
        tasks = loaded
        plan = planOf(jobId, spec, kind, loaded.length, defaults)
        ledger = JobLedger.start(
          loaded.map((task) => task.key),
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
          now,
          admission,
        )
        ledger.emit(
          jobId,
          stateChanged(JobState.RUNNING, view.status.state, undefined),
          now,
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
    let latest: WeightsAnnouncement | undefined
    if (learnsWeights(plan.kind)) {
      const found = yield* ctx.weights.get(weightsKey(jobId))
      if (Option.isSome(found)) latest = decodeAnnouncement(found.value.value)
    }
    const t: Tenure = {
      ctx,
      jobId,
      lease,
      view,
      absorb,
      gen,
      spec,
      loadTasks,
      resumed: stored !== undefined,
      ledger,
      plan,
      tasks,
      latest,
      restoredOutbox: stored !== undefined,
    }
    // The admission is committed before its events or any work item leave the process.
    if (admission.changed) yield* commit(t, ledger)
    return t
  })

/** Buses on which a job's episode consumer exists already (it outlives a tenure). */
const jobConsumers = new WeakMap<object, Set<string>>()

/** The job's episodes go to its own subject, which its consumer must exist to deliver. */
const ensureJobConsumer = (t: Tenure) =>
  Effect.suspend(() => {
    const seen = jobConsumers.get(t.ctx.bus) ?? new Set<string>()
    jobConsumers.set(t.ctx.bus, seen)
    if (seen.has(t.jobId)) return Effect.void
    return ensureJobEpisodes(t.ctx.bus, t.ctx.options.subjects, t.jobId).pipe(
      Effect.tap(() => Effect.sync(() => seen.add(t.jobId))),
    )
  })

const publishItems = (t: Tenure, issue: ReadonlyArray<OpenEpisode>) =>
  issue.length === 0
    ? Effect.void
    : Effect.andThen(
        ensureJobConsumer(t),
        Effect.forEach(
          issue,
          (open) =>
            t.ctx.bus.jsPublish(
              jobEpisodesSubject(t.ctx.options.subjects, t.jobId),
              toBinary(
                EpisodeWorkItemSchema,
                workItemOf(t.plan, t.spec, t.ledger.seed, t.tasks, open),
              ),
              { msgId: workItemMsgId(t.jobId, open.index, open.attempt) },
            ),
          { discard: true },
        ),
      )

/** Commits the ledger; new events get their seqs first (from the status's last_event_seq). */
const commit = (t: Tenure, next: JobLedger) =>
  Effect.gen(function* () {
    if (next.outbox.events.length > 0 && next.outbox.seqFrom === undefined) {
      const found = yield* t.ctx.store.getStored(t.jobId)
      const last = Option.isSome(found) ? found.value.status.lastEventSeq : 0n
      next.outbox.seqFrom = Number(last) + 1
    }
    yield* t.lease.commit(next.toData())
  })

/**
 * Publishes the outbox's events, then stores the status derived from the ledger with
 * last_event_seq moved past them (compare-and-set). Events are numbered from the outbox's
 * seqFrom (fixed at commit time), and, as in the job store's appendEvent, a number another
 * writer took (a duplicate Nats-Msg-Id) passes to the next. After a restart, a duplicate at the
 * recorded number is this outbox's own publish from before the crash, and a status already past
 * the outbox means the crash came after both.
 */
const sync = (t: Tenure) =>
  Effect.gen(function* () {
    const { store } = t.ctx
    let publishedThrough: bigint | undefined
    for (;;) {
      const found = yield* store.getStored(t.jobId)
      if (Option.isNone(found)) {
        t.view.deleted = true
        return
      }
      const { status, revision } = found.value
      t.absorb({ _tag: "Status", job: found.value })
      if (isTerminalState(status.state) && !isFinalPhase(t.ledger.phase)) return
      const events = t.ledger.outbox.events
      if (publishedThrough === undefined && events.length > 0) {
        const from = t.ledger.outbox.seqFrom ?? Number(status.lastEventSeq) + 1
        const recovering = t.restoredOutbox && t.ledger.outbox.seqFrom !== undefined
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
      t.restoredOutbox = false
      const through = publishedThrough ?? 0n
      const learns = learnsWeights(t.plan.kind)
      const next = t.ledger.statusOver(status, t.plan, {
        lastEventSeq: laterSeq(status.lastEventSeq, through),
        policyVersion: learns ? t.latest?.policyVersion : undefined,
        learnerStep: learns ? t.latest?.step : undefined,
        now: yield* Clock.currentTimeMillis,
      })
      if (!sameStatus(status, next)) {
        const written = yield* store.compareAndSet(t.jobId, next, revision).pipe(
          Effect.map(Option.some),
          Effect.catchTag("KvConflict", () => Effect.succeed(Option.none<number>())),
        )
        if (Option.isNone(written)) continue
        t.view.status = next
        t.view.revision = Math.max(t.view.revision, written.value)
      }
      // Persisted with the next commit; until then a restart finds them stored (see above).
      t.ledger.outbox = { seqFrom: undefined, events: [] }
      return
    }
  })

const recordMetrics = (t: Tenure, fx: StepEffects) =>
  Effect.sync(() => {
    const m = t.ctx.metrics
    if (fx.admitted > 0) m.admitted.inc(fx.admitted)
    if (fx.retried > 0) m.retried.inc(fx.retried)
    for (const [result, n] of Object.entries(fx.finished)) if (n > 0) m.finished.inc({ result }, n)
  })

/**
 * After taking a job over: sends the events a previous holder committed and may not have sent,
 * checks that a resumed job's tasks are all still there (failing the job when not), and
 * re-publishes recently issued work items (their first publish may have died with the last
 * holder; the work queue's duplicate window drops those that were stored). "over" when there
 * is nothing left to run.
 */
const recover = (t: Tenure) =>
  Effect.gen(function* () {
    const o = t.ctx.options
    yield* sync(t)
    if (t.resumed && t.ledger.phase === "running") {
      const loaded = yield* Effect.result(t.loadTasks)
      const keys = loaded._tag === "Success" ? loaded.success.map((task) => task.key) : []
      const missing = t.ledger.taskKeys.filter((k) => !keys.includes(k))
      if (loaded._tag === "Failure" || missing.length > 0) {
        const message =
          loaded._tag === "Failure"
            ? loaded.failure.message
            : `tasks of the job are gone from ${t.spec.taskSet}: ${missing.slice(0, 5).join(", ")}`
        const fx = newEffects()
        const now = yield* Clock.currentTimeMillis
        t.ledger.finish(t.plan, "failed", { code: ErrorCode.UNAVAILABLE, message }, now, fx)
        yield* commit(t, t.ledger)
        yield* sync(t)
      } else {
        // In the ledger's order, which is the order the job was admitted with.
        const byKey = new Map(loaded.success.map((task) => [task.key, task]))
        t.tasks = t.ledger.taskKeys.flatMap((k) => {
          const task = byKey.get(k)
          return task === undefined ? [] : [task]
        })
      }
    }
    if (t.ledger.phase === "running") {
      const now = yield* Clock.currentTimeMillis
      yield* publishItems(
        t,
        [...t.ledger.open.values()].filter((e) => now - e.issuedAtMs < o.republishWindowMs),
      )
    }
    const over = isTerminalState(t.view.status.state) || t.view.deleted
    if (isFinalPhase(t.ledger.phase) || over) {
      if (over) yield* t.lease.remove
      return "over" as const
    }
    return "running" as const
  })

/** The job's trajectory records, a timer, and (training) its weight announcements, to the inbox. */
const followInputs = (
  t: Tenure,
  inbox: Queue.Queue<JobInput>,
  lost: (reason: string) => Effect.Effect<unknown>,
) =>
  Effect.gen(function* () {
    const { bus, options: o } = t.ctx
    const { gen, jobId } = t
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
    if (learnsWeights(t.plan.kind)) {
      const announcements = yield* t.ctx.weights.watch(weightsKey(jobId))
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
  })

/**
 * One step of the job's life: the inputs read into a draft of the ledger (end records, status
 * changes, new weights), the draft settled (admission, retries, cancel, the end) and committed,
 * then its work items, events and status sent and the records acked. "over" when the job is
 * final, deleted or ended elsewhere.
 */
const applyInputs = (t: Tenure, inputs: ReadonlyArray<JobInput>) =>
  Effect.gen(function* () {
    const { jobId, gen, view } = t
    const o = t.ctx.options
    const now = yield* Clock.currentTimeMillis
    const draft = t.ledger.clone()
    const fx = newEffects()
    const acks: WorkItem[] = []
    const poison: WorkItem[] = []
    let statusSeen = false
    for (const input of inputs) {
      switch (input._tag) {
        case "Status":
        case "Deleted":
          t.absorb(input)
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
          if (decoded.record.case === "end") draft.recordEnd(t.plan, decoded.record.value, now, fx)
          acks.push(input.item)
          break
        }
        case "Weights":
          if (input.gen !== gen) break
          if (t.latest === undefined || input.announcement.policyVersion > t.latest.policyVersion) {
            t.latest = input.announcement
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
      yield* t.lease.remove
      return "over" as const
    }
    if (isTerminalState(view.status.state) && !isFinalPhase(draft.phase)) {
      // Ended by someone else (e.g. cancelled without waiting): nothing more to run or count.
      yield* Effect.forEach(acks, (i) => Effect.ignore(i.ack), { discard: true })
      yield* t.lease.remove
      yield* Effect.logInfo(
        `coordinator: job ${jobId} ended elsewhere (${JobState[view.status.state]})`,
      )
      return "over" as const
    }
    const step: StepContext = {
      now,
      cancelRequested: isCancelRequested(view.status)
        ? { code: ErrorCode.CANCELLED, message: view.status.error?.message || "cancelled" }
        : undefined,
      learnerStep: t.latest === undefined ? undefined : Number(t.latest.step),
      policyVersion: t.latest?.policyVersion ?? 0n,
      cancelGraceMs: o.cancelGraceMs,
      episodeTimeoutMs: o.episodeTimeoutMs,
    }
    draft.settle(t.plan, step, fx)
    if (fx.changed) {
      yield* commit(t, draft)
      t.ledger = draft
    }
    yield* publishItems(t, fx.issue)
    if (fx.changed || statusSeen || t.ledger.outbox.events.length > 0) yield* sync(t)
    yield* Effect.forEach(acks, (i) => Effect.ignore(i.ack), { discard: true })
    yield* Effect.forEach(poison, (i) => Effect.ignore(i.term("undecodable record")), {
      discard: true,
    })
    yield* recordMetrics(t, fx)
    const l = t.ledger
    if (isFinalPhase(l.phase) && isTerminalState(view.status.state)) {
      yield* Effect.logInfo(
        `coordinator: job ${jobId} ${l.phase}: ${l.finished} finished, ${l.failed} failed, ${l.unverifiable} unverifiable, ${l.retried} retried`,
      )
      yield* t.lease.remove
      return "over" as const
    }
    return "continue" as const
  })
