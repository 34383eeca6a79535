import { randomUUID } from "node:crypto"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Clock, Effect, Schedule, Stream } from "effect"
import {
  BatchSchema,
  EpisodeEndSchema,
  ObjectRefSchema,
  type ReadyTrajectory,
  ReadyTrajectorySchema,
  type TakeBatchRequest,
  TakeBatchRequestSchema,
  TrajectorySchema,
} from "../../proto/index.ts"
import { protobufDecoder, runActor } from "../../services/actor/index.ts"
import {
  Bus,
  BusClosed,
  type BusError,
  JetStreamError,
  type ObjectStore,
  type Subjects,
  type WorkItem,
} from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import { Metrics } from "../../services/metrics/index.ts"
import { makeIngest } from "./ingest.ts"
import { type BufferMetrics, bufferMetrics } from "./metrics.ts"
import {
  BATCH_RESERVE_BYTES,
  type BufferNames,
  batchBudget,
  bufferNames,
  exclusionOf,
  sha256Hex,
} from "./names.ts"
import { type Cut, type Dropped, ReadyPool, type StalePolicy, type Step } from "./ready-pool.ts"

export interface BufferOptions {
  readonly subjects: Subjects
  readonly jobId: string
  /** Rollouts per group (k) when a request does not say; 0: groups are whole only by timeout. */
  readonly groupSize?: number
  /** Trajectories staler than a request's η: dropped (default), or served down-weighted. */
  readonly stalePolicy?: StalePolicy
  /** Weight of a trajectory s − η versions too stale: staleDecay^(s − η). Default 0.5. */
  readonly staleDecay?: number
  /** An incomplete attempt with no new record for this long is dropped. Default 30 min. */
  readonly expireAfterMs?: number
  /** A group with no new member for this long is served as it is. Default 10 min. */
  readonly groupTimeoutMs?: number
  /** A served batch not confirmed (ack_batch_id) within this time is served again. Default 5 min. */
  readonly batchAckTimeoutMs?: number
  /** Ack wait of the trajectory-stream consumer (records are heartbeated while held). 60 s. */
  readonly ingestAckWaitMs?: number
  /** Ack wait of the READY consumer (held trajectories are heartbeated). 60 s. */
  readonly readyAckWaitMs?: number
  /** Batch size when a request's max_trajectories is 0. Default 64. */
  readonly defaultMaxTrajectories?: number
  /** Records of incomplete attempts held un-acked at most (consumer max_ack_pending). 100 000. */
  readonly maxHeldRecords?: number
  /** Stored trajectories held in memory at most (READY consumer max_ack_pending). 10 000. */
  readonly maxReady?: number
  /** Duplicate window of the READY stream (re-stores after a crash are dropped). 30 min. */
  readonly readyDuplicateWindowMs?: number
  /** How often expiries (attempts, unconfirmed batches) are checked. Default 1 s. */
  readonly tickMs?: number
  /** Take requests handled at once (most of them wait). Default 16. */
  readonly takeConcurrency?: number
  readonly shutdownGraceMs?: number
}

const backoff = Schedule.min([
  Schedule.exponential("200 millis"),
  Schedule.spaced("30 seconds"),
]).pipe(Schedule.jittered)

/** Runs a consumer loop for ever: a loop that ends, fails or dies is restarted with backoff. */
const supervised = (name: string, loop: Effect.Effect<void, BusError>) =>
  loop.pipe(
    Effect.andThen(Effect.fail(new BusClosed({ operation: name }))),
    Effect.catchDefect((defect) =>
      Effect.fail(new JetStreamError({ operation: name, reason: String(defect) })),
    ),
    Effect.tapError((e) => Effect.logWarning(`${name} failed (${e.message}); restarting`)),
    Effect.retry(backoff),
    Effect.orDie,
  )

/** The exact-size fields of a READY message besides the trajectory (its end record). */
const endFieldBytes = (ready: ReadyTrajectory): number =>
  ready.end ? toBinary(EpisodeEndSchema, ready.end).length + 6 : 0

/** The serving side: READY messages in, batches out. */
const makeServing = (
  names: BufferNames,
  objects: ObjectStore,
  pool: ReadyPool,
  m: BufferMetrics,
  maxPayload: number,
  options: {
    readonly groupSize: number
    readonly defaultMaxTrajectories: number
    readonly batchAckTimeoutMs: number
  },
) => {
  const job = names.jobId

  const deleteObject = (name: string) =>
    Effect.ignore(
      objects
        .delete(name)
        .pipe(
          Effect.tapError((e) =>
            Effect.logWarning(`buffer ${job}: deleting object ${name}: ${e.message}`),
          ),
        ),
    )

  const settleDropped = (dropped: ReadonlyArray<Dropped>) =>
    Effect.forEach(
      dropped,
      ({ entry, reason }) => {
        m.dropped.inc({ job, reason })
        return Effect.andThen(
          Effect.ignore(entry.work.ack),
          entry.ref === undefined ? Effect.void : deleteObject(entry.ref.name),
        )
      },
      { discard: true },
    )

  const onReady = (item: WorkItem): Effect.Effect<void> =>
    Effect.flatMap(Clock.currentTimeMillis, (arrivedMs) => {
      let ready: ReadyTrajectory
      try {
        ready = fromBinary(ReadyTrajectorySchema, item.data)
      } catch {
        ready = create(ReadyTrajectorySchema)
      }
      const end = ready.end
      const body = ready.body
      if (end === undefined || body.case === undefined) {
        m.dropped.inc({ job, reason: "malformed" })
        return Effect.ignore(item.term("malformed"))
      }
      // Stored for the record; never trained on (counted when stored): infra-failed, or
      // unverifiable (no score exists).
      if (exclusionOf(end) !== undefined) return Effect.ignore(item.ack)
      pool.add({
        seq: item.streamSeq,
        work: item,
        end,
        tokens: end.totalTokens,
        arrivedMs,
        trajectory: body.case === "inline" ? body.value : undefined,
        inlineBytes: body.case === "inline" ? item.data.length - endFieldBytes(ready) : 0,
        ref: body.case === "object" ? body.value : undefined,
      })
      return Effect.void
    })

  const confirm = (batchId: string) =>
    Effect.gen(function* () {
      const entries = pool.confirm(batchId)
      if (entries === undefined) {
        yield* Effect.logDebug(`buffer ${job}: confirmation of unknown batch ${batchId} ignored`)
        return
      }
      m.batches.inc({ job, event: "confirmed" })
      for (const e of entries) {
        yield* Effect.ignore(e.work.ack)
        if (e.ref !== undefined) yield* deleteObject(e.ref.name)
      }
    })

  /** Puts the trajectories a batch serves by reference (but holds inline) in the object store. */
  const spill = (step: Step) =>
    Effect.forEach(
      step.selected.filter((s) => s.asRef && s.entry.ref === undefined),
      ({ entry }) =>
        Effect.gen(function* () {
          const t = entry.trajectory
          if (t === undefined) return
          const bytes = toBinary(TrajectorySchema, t)
          const name = names.objectName(entry.end.episodeId)
          yield* objects.put(name, bytes)
          entry.ref = create(ObjectRefSchema, {
            bucket: names.objectBucket,
            name,
            sha256: sha256Hex(bytes),
            sizeBytes: BigInt(bytes.length),
          })
        }),
      { concurrency: 4, discard: true },
    )

  const reply = (
    req: TakeBatchRequest,
    step: Step,
    batchId: string,
    dropped: { stale: number; zeroVariance: number },
  ) =>
    Effect.gen(function* () {
      yield* spill(step).pipe(Effect.tapError(() => Effect.sync(() => pool.putBack(batchId))))
      const inline = step.selected.filter((s) => !s.asRef)
      const refs = step.selected.filter((s) => s.asRef)
      const n = step.selected.length
      const batch = create(BatchSchema, {
        jobId: job,
        batchId,
        policyVersion: req.policyVersion,
        trajectories: inline.flatMap((s) => (s.entry.trajectory ? [s.entry.trajectory] : [])),
        trajectoryRefs: refs.flatMap((s) => (s.entry.ref ? [s.entry.ref] : [])),
        weights: [...inline, ...refs].map((s) => s.weight),
        totalTokens: BigInt(step.tokens),
        droppedStale: dropped.stale,
        droppedZeroVariance: dropped.zeroVariance,
        stalenessMean: n === 0 ? 0 : step.selected.reduce((a, s) => a + s.staleness, 0) / n,
      })
      const bytes = toBinary(BatchSchema, batch)
      if (bytes.length > maxPayload - BATCH_RESERVE_BYTES / 2) {
        pool.putBack(batchId)
        return yield* Effect.die(
          new Error(`buffer ${job}: batch of ${bytes.length} bytes does not fit one message`),
        )
      }
      if (n > 0) {
        m.batches.inc({ job, event: "served" })
        m.trajectoriesOut.inc({ job }, n)
        for (const s of step.selected) m.staleness.observe({ job }, s.staleness)
      }
      return bytes
    })

  const take = (req: TakeBatchRequest) =>
    Effect.gen(function* () {
      if (req.jobId !== "" && req.jobId !== job)
        return yield* Effect.die(new Error(`this buffer serves job ${job}, not ${req.jobId}`))
      if (req.ackBatchId !== "") yield* confirm(req.ackBatchId)
      const cut: Cut = {
        maxTrajectories: req.maxTrajectories || options.defaultMaxTrajectories,
        maxTokens: req.maxTokens,
        policyVersion: req.policyVersion,
        maxStaleness: req.maxStaleness,
        wholeGroups: req.wholeGroups,
        dropZeroVariance: req.dropZeroVarianceGroups,
        groupSize: req.groupSize || options.groupSize,
        budgetBytes: batchBudget(maxPayload),
      }
      const deadline = (yield* Clock.currentTimeMillis) + req.waitMs
      const dropped = { stale: 0, zeroVariance: 0 }
      for (;;) {
        const changed = pool.changed
        const now = yield* Clock.currentTimeMillis
        const step = pool.step(cut, now)
        const commit = step.full || now >= deadline
        const batchId = commit && step.selected.length > 0 ? randomUUID() : ""
        // Synchronously after the step: no other request can take the same trajectories.
        if (commit) pool.take(step.selected, batchId, now + options.batchAckTimeoutMs)
        for (const d of step.dropped) {
          if (d.reason === "stale") dropped.stale++
          else dropped.zeroVariance++
        }
        yield* settleDropped(step.dropped)
        if (commit) return yield* reply(req, step, batchId, dropped)
        yield* Effect.timeoutOption(changed, `${Math.max(1, deadline - now)} millis`)
      }
    })

  return { onReady, take }
}

/**
 * The buffer actor of one job (requires Bus | Metrics), see wire.ts for its names on the bus:
 * - ingest: the durable consumer `buffer-<job>` on the trajectory stream feeds the assembler;
 *   a complete attempt is claimed (one attempt per episode trains) and stored on READY before
 *   its records are acked (see ingest.ts);
 * - serving: the durable consumer `buffer-<job>` on READY fills the ready pool; take requests
 *   cut batches from it (staleness, whole groups, zero-variance filter, trajectory / token /
 *   reply-size bounds). A served trajectory's READY message is acked only when the learner
 *   confirms its batch (the next request's ack_batch_id); otherwise it is served again after
 *   batchAckTimeoutMs, or, after a restart, when the stream redelivers it.
 * One buffer process per job: an episode's records must all reach the process assembling it.
 */
export const runBuffer = (options: BufferOptions): Effect.Effect<never, BusError, Bus | Metrics> =>
  Effect.scoped(
    Effect.gen(function* () {
      const bus = yield* Bus
      const m = bufferMetrics(yield* Metrics)
      const names = bufferNames(options.subjects, options.jobId)
      const job = names.jobId
      const ingestAckWaitMs = options.ingestAckWaitMs ?? 60_000
      const readyAckWaitMs = options.readyAckWaitMs ?? 60_000
      const maxHeld = options.maxHeldRecords ?? 100_000
      const maxReady = options.maxReady ?? 10_000
      const tickMs = options.tickMs ?? 1000

      yield* ensureSamplerStreams(bus, options.subjects)
      yield* bus.ensureStream({
        name: names.readyStream,
        subjects: [names.allReady],
        retention: "workqueue",
        storage: "file",
        duplicateWindowMs: options.readyDuplicateWindowMs ?? 30 * 60_000,
      })
      // maxDeliver -1: a held message is redelivered as often as the buffer restarts.
      yield* bus.ensureConsumer({
        stream: names.trajectoriesStream,
        durable: names.durable,
        filterSubject: names.trajectories,
        ackWaitMs: ingestAckWaitMs,
        maxDeliver: -1,
        maxAckPending: maxHeld,
      })
      yield* bus.ensureConsumer({
        stream: names.readyStream,
        durable: names.durable,
        filterSubject: names.ready,
        ackWaitMs: readyAckWaitMs,
        maxDeliver: -1,
        maxAckPending: maxReady,
      })
      const claims = yield* bus.kv(names.claimsBucket)
      const objects = yield* bus.objectStore(names.objectBucket)

      const ingest = makeIngest({
        bus,
        names,
        metrics: m,
        claims,
        expireAfterMs: options.expireAfterMs ?? 30 * 60_000,
      })
      const pool = new ReadyPool({
        stalePolicy: options.stalePolicy ?? "drop",
        staleDecay: options.staleDecay ?? 0.5,
        groupTimeoutMs: options.groupTimeoutMs ?? 10 * 60_000,
      })
      const serving = makeServing(names, objects, pool, m, bus.maxPayload, {
        groupSize: options.groupSize ?? 0,
        defaultMaxTrajectories: options.defaultMaxTrajectories ?? 64,
        batchAckTimeoutMs: options.batchAckTimeoutMs ?? 5 * 60_000,
      })
      const gauges = Effect.sync(() => {
        m.bytesHeld.set({ job }, ingest.bytesHeld() + pool.bytes)
        m.ready.set({ job }, pool.size)
        m.assembling.set({ job }, ingest.pending())
        m.unconfirmed.set({ job }, pool.unconfirmed)
      })

      yield* Effect.forkScoped(
        supervised(
          `buffer ${job}: trajectory consumer`,
          Stream.runForEach(
            bus.consume(names.trajectoriesStream, names.durable, { maxInFlight: maxHeld }),
            (item) => Effect.andThen(ingest.onItem(item), gauges),
          ),
        ),
      )
      yield* Effect.forkScoped(
        supervised(
          `buffer ${job}: READY consumer`,
          Stream.runForEach(
            bus.consume(names.readyStream, names.durable, { maxInFlight: maxReady }),
            (item) => Effect.andThen(serving.onReady(item), gauges),
          ),
        ),
      )
      yield* Effect.forkScoped(
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          yield* ingest.expire(now)
          const overdue = pool.overdue(now)
          if (overdue.length > 0) {
            m.batches.inc({ job, event: "expired" }, overdue.length)
            yield* Effect.logWarning(
              `buffer ${job}: ${overdue.length} unconfirmed batch(es) timed out; serving them again`,
            )
            for (const id of overdue) pool.putBack(id)
          }
          yield* gauges
        }).pipe(Effect.repeat(Schedule.spaced(`${tickMs} millis`))),
      )
      yield* Effect.forkScoped(
        Effect.gen(function* () {
          yield* ingest.heartbeat
          yield* Effect.forEach(pool.heldItems(), (item) => Effect.ignore(item.working), {
            discard: true,
          })
        }).pipe(
          Effect.repeat(
            Schedule.spaced(
              `${Math.max(50, Math.min(ingestAckWaitMs, readyAckWaitMs) / 3)} millis`,
            ),
          ),
        ),
      )

      return yield* runActor(
        {
          name: `buffer-${job}`,
          mailbox: { kind: "subscription", subject: names.take, queue: names.takeQueue },
          decode: protobufDecoder(TakeBatchRequestSchema),
          handle: (req: TakeBatchRequest, delivery) =>
            serving.take(req).pipe(Effect.flatMap(delivery.respond), Effect.ensuring(gauges)),
        },
        {
          concurrency: options.takeConcurrency ?? 16,
          ...(options.shutdownGraceMs === undefined
            ? {}
            : { shutdownGraceMs: options.shutdownGraceMs }),
        },
      )
    }),
  )
