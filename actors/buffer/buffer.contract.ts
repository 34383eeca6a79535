import { randomUUID } from "node:crypto"
import { clone, create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Effect, Exit, Fiber, type Layer, Option, Schedule, Scope } from "effect"
import { describe, expect, it } from "vitest"
import {
  type Batch,
  BatchSchema,
  EpisodeEndSchema,
  TakeBatchRequestSchema,
  type Trajectory,
  type TrajectoryRecord,
} from "../../proto/index.ts"
import {
  Bus,
  type BusError,
  type BusShape,
  type Subjects,
  subjectsFor,
} from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import { Metrics, type MetricsShape, makeMetrics } from "../../services/metrics/index.ts"
import {
  chunkMsgId,
  chunkRecord,
  encodeRecord,
  endMsgId,
  endRecord,
  maxChunkTokens,
  splitSpan,
} from "../sampler/records.ts"
import type { ChunkSpan } from "../sampler/tito.ts"
import { type BufferOptions, runBuffer } from "./actor.ts"
import { resolveBatch, type TakeBatchParams, takeBatch } from "./client.ts"
import { bufferNames } from "./names.ts"

export interface EpisodeSpec {
  readonly episodeId: string
  readonly attempt?: number
  readonly tokens?: number
  readonly chunkTokens?: number
  readonly reward?: number
  readonly groupId?: string
  readonly sampleIndex?: number
  readonly admitted?: bigint
  readonly infra?: boolean
  /** The verifier could not score it (its tests need packages the sandbox lacks). */
  readonly unverifiable?: boolean
  /** Record routing rows (2 layers, top-2 of 4 experts). Default true. */
  readonly routing?: boolean
}

export interface Published {
  readonly record: TrajectoryRecord
  readonly msgId: string | undefined
}

/** The records a sampler streams for one attempt: its chunks, then its end record. */
export const episodeRecords = (jobId: string, spec: EpisodeSpec) => {
  const attempt = spec.attempt ?? 1
  const n = spec.tokens ?? 12
  const who = { jobId, episodeId: spec.episodeId, attempt }
  const seed = [...`${spec.episodeId}:${attempt}`].reduce(
    (h, c) => (h * 31 + c.charCodeAt(0)) >>> 0,
    7,
  )
  const ids = Uint32Array.from({ length: n }, (_, i) => (seed + i * 7919) % 50_000)
  const lossMask = Uint8Array.from({ length: n }, (_, i) => (i >= 3 && i % 2 === 1 ? 1 : 0))
  const logprobs = Float32Array.from(lossMask, (m, i) => (m ? -0.01 * (i + 1) : 0))
  const routed = spec.routing ?? true
  const span: ChunkSpan = {
    start: 0,
    end: n,
    ids,
    logprobs,
    lossMask,
    routing: routed
      ? {
          start: 0,
          rows: Uint8Array.from({ length: (n - 1) * 4 }, (_, i) => (i + seed) % 4),
          layers: 2,
          topK: 2,
          numExperts: 4,
        }
      : undefined,
    turnStarts: [0],
    versionStart: spec.admitted ?? 0n,
    versionEnd: spec.admitted ?? 0n,
  }
  const chunks: Published[] = splitSpan(span, spec.chunkTokens ?? 5).map((piece, seq) => ({
    record: chunkRecord(who, seq, piece, Date.now()),
    msgId: chunkMsgId(who, seq),
  }))
  const end: Published = {
    record: endRecord(
      create(EpisodeEndSchema, {
        ...who,
        totalChunks: chunks.length,
        totalTokens: n,
        reward: spec.reward ?? 1,
        infraFailed: spec.infra ?? false,
        unverifiable: spec.unverifiable ?? false,
        missingPackages: spec.unverifiable === true ? ["numpy"] : [],
        groupId: spec.groupId ?? "",
        sampleIndex: spec.sampleIndex ?? 0,
        admittedPolicyVersion: spec.admitted ?? 0n,
        policyVersionStart: spec.admitted ?? 0n,
        policyVersionEnd: spec.admitted ?? 0n,
      }),
    ),
    msgId: endMsgId(who),
  }
  return { chunks, end, all: [...chunks, end], ids }
}

const idsOf = (t: Trajectory): number[] =>
  Array.from(
    new Uint32Array(
      t.tokenIds.buffer.slice(t.tokenIds.byteOffset, t.tokenIds.byteOffset + t.tokenIds.length),
    ),
  )

const episodesOf = (b: Batch): string[] => b.trajectories.map((t) => t.episodeId).sort()

/** A deterministic shuffle. */
const shuffle = <A>(xs: ReadonlyArray<A>, seed = 1): A[] => {
  const out = [...xs]
  let s = seed
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1_103_515_245 + 12_345) >>> 0
    const j = s % (i + 1)
    const a = out[i] as A
    out[i] = out[j] as A
    out[j] = a
  }
  return out
}

interface Harness {
  readonly bus: BusShape
  readonly subjects: Subjects
  readonly jobId: string
  readonly metrics: MetricsShape
  /** Starts a buffer in its own scope; close the scope to stop it (a crash, for the bus). */
  readonly start: (
    options?: Partial<BufferOptions>,
  ) => Effect.Effect<Scope.Closeable, never, Scope.Scope>
  readonly publish: (records: ReadonlyArray<Published>) => Effect.Effect<void, BusError>
  /** Publishes again without a Nats-Msg-Id: a duplicate the stream stores and redelivers. */
  readonly duplicate: (records: ReadonlyArray<Published>) => Effect.Effect<void, BusError>
  readonly take: (request: Omit<TakeBatchParams, "jobId">) => Effect.Effect<Batch, unknown>
  readonly metric: (name: string, labels?: Record<string, string>) => Effect.Effect<number>
  /** Polls until the metric reaches `value` (at most 10 s). */
  readonly metricReaches: (
    name: string,
    labels: Record<string, string>,
    value: number,
  ) => Effect.Effect<number>
}

/**
 * The buffer's behaviour, on any bus adapter (in-memory and NATS run the same suite). Every test
 * uses its own prefix and job, so the suite can share one server.
 */
export const bufferContract = (name: string, layer: () => Layer.Layer<Bus, BusError>) => {
  const run = <A, E>(f: (h: Harness) => Effect.Effect<A, E, Scope.Scope>) =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          const id = randomUUID().replaceAll("-", "").slice(0, 10)
          const subjects = subjectsFor(`bt${id}`)
          const jobId = `job${id}`
          const metrics = makeMetrics({ defaultMetrics: false })
          yield* ensureSamplerStreams(bus, subjects)
          const stream = subjects.trajectories(jobId)
          const metric = (metricName: string, labels: Record<string, string> = {}) =>
            Effect.promise(async () => {
              const got = await metrics.registry.getSingleMetric(metricName)?.get()
              const want = { job: jobId, ...labels }
              return (got?.values ?? [])
                .filter((v) =>
                  Object.entries(want).every(([k, x]) => String(v.labels[k] ?? "") === x),
                )
                .filter((v) => !("metricName" in v) || v.metricName === `${metricName}_count`)
                .reduce((a, v) => a + v.value, 0)
            })
          const h: Harness = {
            bus,
            subjects,
            jobId,
            metrics,
            start: (options = {}) =>
              Effect.gen(function* () {
                const scope = yield* Scope.make()
                yield* Effect.forkIn(
                  runBuffer({
                    subjects,
                    jobId,
                    ingestAckWaitMs: 600,
                    readyAckWaitMs: 600,
                    tickMs: 100,
                    shutdownGraceMs: 1000,
                    ...options,
                  }).pipe(Effect.provideService(Bus, bus), Effect.provideService(Metrics, metrics)),
                  scope,
                )
                yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
                return scope
              }),
            publish: (records) =>
              Effect.forEach(
                records,
                (r) =>
                  bus.jsPublish(
                    stream,
                    encodeRecord(r.record),
                    r.msgId === undefined ? {} : { msgId: r.msgId },
                  ),
                { discard: true },
              ),
            duplicate: (records) =>
              Effect.forEach(records, (r) => bus.jsPublish(stream, encodeRecord(r.record)), {
                discard: true,
              }),
            take: (request) =>
              takeBatch(bus, subjects, { ...request, jobId }).pipe(
                Effect.retry({
                  while: (e) => e._tag === "NoResponders",
                  schedule: Schedule.spaced("20 millis"),
                  times: 500,
                }),
              ),
            metric,
            metricReaches: (metricName, labels, value) =>
              metric(metricName, labels).pipe(
                Effect.repeat({
                  until: (v) => v >= value,
                  schedule: Schedule.spaced("25 millis"),
                  times: 400,
                }),
              ),
          }
          return yield* f(h)
        }),
      ).pipe(Effect.provide(layer())),
    )

  describe(`buffer: ${name}`, () => {
    it("assembles out-of-order, duplicated records of several episodes and serves each trajectory once", async () => {
      await run((h) =>
        Effect.gen(function* () {
          const eps = [
            episodeRecords(h.jobId, { episodeId: "e1", tokens: 12, chunkTokens: 4 }),
            episodeRecords(h.jobId, { episodeId: "e2", tokens: 17, chunkTokens: 4 }),
            episodeRecords(h.jobId, { episodeId: "e3", tokens: 9, chunkTokens: 4 }),
          ]
          const [e1, e2, e3] = eps as [(typeof eps)[0], (typeof eps)[0], (typeof eps)[0]]
          yield* h.start()
          // e2's end first, every record in shuffled order, some published twice.
          yield* h.publish([e2.end, ...shuffle([...e1.all, ...e2.chunks, ...e3.all], 7)])
          yield* h.duplicate([e1.chunks[0], e3.end, e2.chunks[2]].flatMap((r) => (r ? [r] : [])))
          const b1 = yield* h.take({ maxTrajectories: 3, waitMs: 10_000 })
          expect(episodesOf(b1)).toEqual(["e1", "e2", "e3"])
          expect(b1.weights).toEqual([1, 1, 1])
          expect(b1.totalTokens).toBe(38n)
          expect(b1.batchId).not.toBe("")
          for (const t of b1.trajectories) {
            const want = eps.find((e) => e.end.record.record.value?.episodeId === t.episodeId)
            expect(idsOf(t)).toEqual(Array.from(want?.ids ?? []))
            expect(t.routingShape).toEqual([t.end?.totalTokens ? t.end.totalTokens - 1 : 0, 2, 2])
          }
          const b2 = yield* h.take({ maxTrajectories: 10, waitMs: 300, ackBatchId: b1.batchId })
          expect(b2.trajectories).toEqual([])
          expect(b2.batchId).toBe("")
          expect(yield* h.metric("t1_buffer_trajectories_in_total")).toBe(3)
          expect(yield* h.metric("t1_buffer_trajectories_out_total")).toBe(3)
          expect(yield* h.metric("t1_buffer_dropped_total")).toBe(0)
        }),
      )
    })

    it("keeps one attempt per episode: the first complete attempt wins, the others are dropped", async () => {
      await run((h) =>
        Effect.gen(function* () {
          const a1 = episodeRecords(h.jobId, { episodeId: "e1", attempt: 1, tokens: 11 })
          const a2 = episodeRecords(h.jobId, { episodeId: "e1", attempt: 2, tokens: 13 })
          const a3 = episodeRecords(h.jobId, { episodeId: "e1", attempt: 3, tokens: 8 })
          yield* h.start()
          // Attempt 1 dies after one chunk; attempt 2 completes; attempt 3 completes later.
          yield* h.publish([...a1.chunks.slice(0, 1), ...a2.all, ...a3.all])
          const b1 = yield* h.take({ maxTrajectories: 1, waitMs: 10_000 })
          expect(b1.trajectories.map((t) => [t.episodeId, t.attempt])).toEqual([["e1", 2]])
          expect(
            yield* h.metricReaches("t1_buffer_dropped_total", { reason: "duplicate_attempt" }, 2),
          ).toBe(2)
          const b2 = yield* h.take({ maxTrajectories: 5, waitMs: 300, ackBatchId: b1.batchId })
          expect(b2.trajectories).toEqual([])
          expect(yield* h.metric("t1_buffer_trajectories_in_total")).toBe(1)
        }),
      )
    })

    it("stores infra-failed episodes but never serves them; a later good attempt still wins", async () => {
      await run((h) =>
        Effect.gen(function* () {
          yield* h.start()
          yield* h.publish([
            ...episodeRecords(h.jobId, { episodeId: "e1", attempt: 1, infra: true, reward: 0 }).all,
            ...episodeRecords(h.jobId, { episodeId: "e2", attempt: 1, infra: true, reward: 0 }).all,
            ...episodeRecords(h.jobId, { episodeId: "e1", attempt: 2, reward: 3 }).all,
          ])
          const b1 = yield* h.take({ maxTrajectories: 1, waitMs: 10_000 })
          expect(b1.trajectories.map((t) => [t.episodeId, t.attempt])).toEqual([["e1", 2]])
          expect(yield* h.metricReaches("t1_buffer_infra_failed_total", {}, 2)).toBe(2)
          expect(yield* h.metricReaches("t1_buffer_trajectories_in_total", {}, 3)).toBe(3)
          // Reward statistics leave infra failures out.
          expect(yield* h.metric("t1_buffer_reward")).toBe(1)
          const b2 = yield* h.take({ maxTrajectories: 5, waitMs: 300, ackBatchId: b1.batchId })
          expect(b2.trajectories).toEqual([])
        }),
      )
    })

    it("stores unverifiable episodes but never serves them, acks them, and lets no claim stand in the way", async () => {
      await run((h) =>
        Effect.gen(function* () {
          const first = yield* h.start()
          yield* h.publish([
            ...episodeRecords(h.jobId, {
              episodeId: "u1",
              attempt: 1,
              unverifiable: true,
              reward: 0,
            }).all,
            ...episodeRecords(h.jobId, {
              episodeId: "u2",
              attempt: 1,
              unverifiable: true,
              reward: 0,
            }).all,
            // A scored attempt of u1 (a redelivered run) still wins: unverifiable never claims.
            ...episodeRecords(h.jobId, { episodeId: "u1", attempt: 2, reward: 2 }).all,
          ])
          const b1 = yield* h.take({ maxTrajectories: 1, waitMs: 10_000 })
          expect(b1.trajectories.map((t) => [t.episodeId, t.attempt])).toEqual([["u1", 2]])
          expect(yield* h.metricReaches("t1_buffer_unverifiable_total", {}, 2)).toBe(2)
          expect(yield* h.metricReaches("t1_buffer_trajectories_in_total", {}, 3)).toBe(3)
          expect(yield* h.metric("t1_buffer_infra_failed_total")).toBe(0)
          // Reward statistics leave unverifiable episodes out.
          expect(yield* h.metric("t1_buffer_reward")).toBe(1)
          const b2 = yield* h.take({ maxTrajectories: 5, waitMs: 300, ackBatchId: b1.batchId })
          expect(b2.trajectories).toEqual([])
          // Every record was acked: a new buffer after the ack wait sees nothing to store again.
          yield* Scope.close(first, Exit.void)
          yield* h.start()
          yield* Effect.sleep("1500 millis")
          const b3 = yield* h.take({ maxTrajectories: 5, waitMs: 300 })
          expect(b3.trajectories).toEqual([])
          expect(yield* h.metric("t1_buffer_unverifiable_total")).toBe(2)
          expect(yield* h.metric("t1_buffer_trajectories_in_total")).toBe(3)
        }),
      )
    })

    it("drops trajectories staler than η and counts them", async () => {
      await run((h) =>
        Effect.gen(function* () {
          yield* h.start()
          yield* h.publish([
            ...episodeRecords(h.jobId, { episodeId: "old0", admitted: 0n }).all,
            ...episodeRecords(h.jobId, { episodeId: "old2", admitted: 2n }).all,
            ...episodeRecords(h.jobId, { episodeId: "v4", admitted: 4n }).all,
            ...episodeRecords(h.jobId, { episodeId: "v5", admitted: 5n }).all,
          ])
          const b = yield* h.take({
            maxTrajectories: 2,
            policyVersion: 5n,
            maxStaleness: 1,
            waitMs: 10_000,
          })
          expect(episodesOf(b)).toEqual(["v4", "v5"])
          expect(b.droppedStale).toBe(2)
          expect(b.stalenessMean).toBe(0.5)
          expect(yield* h.metric("t1_buffer_dropped_total", { reason: "stale" })).toBe(2)
          expect(yield* h.metric("t1_buffer_staleness")).toBe(2)
        }),
      )
    })

    it("down-weights stale trajectories when configured: weight 0.5^(staleness − η)", async () => {
      await run((h) =>
        Effect.gen(function* () {
          yield* h.start({ stalePolicy: "downweight" })
          yield* h.publish([
            ...episodeRecords(h.jobId, { episodeId: "a", admitted: 2n }).all,
            ...episodeRecords(h.jobId, { episodeId: "b", admitted: 5n }).all,
          ])
          const b = yield* h.take({
            maxTrajectories: 2,
            policyVersion: 5n,
            maxStaleness: 1,
            waitMs: 10_000,
          })
          const weights = Object.fromEntries(
            b.trajectories.map((t, i) => [t.episodeId, b.weights[i]]),
          )
          expect(weights).toEqual({ a: 0.25, b: 1 })
          expect(b.droppedStale).toBe(0)
        }),
      )
    })

    it("serves whole groups only and drops zero-variance groups", async () => {
      await run((h) =>
        Effect.gen(function* () {
          const member = (group: string, i: number, reward: number) =>
            episodeRecords(h.jobId, {
              episodeId: `${group}${i}`,
              groupId: group,
              sampleIndex: i,
              reward,
            }).all
          yield* h.start()
          yield* h.publish([
            ...member("C", 0, 2),
            ...member("B", 0, 0),
            ...member("C", 1, 2),
            ...member("A", 0, 1),
            ...member("B", 1, 1),
            ...member("C", 2, 2),
            ...member("A", 1, 2),
            ...member("A", 2, 3),
          ])
          const whole = {
            wholeGroups: true,
            groupSize: 3,
            dropZeroVarianceGroups: true,
            maxTrajectories: 3,
          }
          const b1 = yield* h.take({ ...whole, waitMs: 10_000 })
          expect(episodesOf(b1)).toEqual(["A0", "A1", "A2"])
          expect(b1.droppedZeroVariance).toBe(3)
          expect(yield* h.metric("t1_buffer_dropped_total", { reason: "zero_variance" })).toBe(3)
          // B is incomplete: nothing more until its last member arrives.
          const b2 = yield* h.take({ ...whole, waitMs: 300, ackBatchId: b1.batchId })
          expect(b2.trajectories).toEqual([])
          yield* h.publish(member("B", 2, 1))
          const b3 = yield* h.take({ ...whole, waitMs: 10_000 })
          expect(episodesOf(b3)).toEqual(["B0", "B1", "B2"])
        }),
      )
    })

    it("respects max_tokens and max_trajectories", async () => {
      await run((h) =>
        Effect.gen(function* () {
          yield* h.start()
          yield* h.publish(
            [1, 2, 3, 4, 5].flatMap(
              (i) => episodeRecords(h.jobId, { episodeId: `e${i}`, tokens: 10 }).all,
            ),
          )
          const b1 = yield* h.take({ maxTokens: 25, maxTrajectories: 10, waitMs: 10_000 })
          expect(b1.trajectories.length).toBe(2)
          expect(b1.totalTokens).toBe(20n)
          const b2 = yield* h.take({ maxTrajectories: 1, waitMs: 10_000, ackBatchId: b1.batchId })
          expect(b2.trajectories.length).toBe(1)
          const b3 = yield* h.take({ maxTrajectories: 2, waitMs: 10_000, ackBatchId: b2.batchId })
          expect(b3.trajectories.length).toBe(2)
          const all = [...b1.trajectories, ...b2.trajectories, ...b3.trajectories]
          expect(all.map((t) => t.episodeId).sort()).toEqual(["e1", "e2", "e3", "e4", "e5"])
        }),
      )
    })

    it("waits up to wait_ms: returns as soon as enough arrive, else what there is", async () => {
      await run((h) =>
        Effect.gen(function* () {
          yield* h.start()
          const t0 = Date.now()
          const empty = yield* h.take({ maxTrajectories: 5, waitMs: 400 })
          expect(empty.trajectories).toEqual([])
          expect(Date.now() - t0).toBeGreaterThanOrEqual(350)
          const started = Date.now()
          const pending = yield* Effect.forkChild(h.take({ maxTrajectories: 2, waitMs: 20_000 }))
          yield* Effect.sleep("300 millis")
          yield* h.publish([
            ...episodeRecords(h.jobId, { episodeId: "x" }).all,
            ...episodeRecords(h.jobId, { episodeId: "y" }).all,
          ])
          const b = yield* Fiber.join(pending)
          expect(episodesOf(b)).toEqual(["x", "y"])
          expect(Date.now() - started).toBeLessThan(10_000)
          // Fewer than asked: the rest of the wait, then what there is.
          yield* h.publish(episodeRecords(h.jobId, { episodeId: "z" }).all)
          const partial = yield* h.take({
            maxTrajectories: 5,
            waitMs: 700,
            ackBatchId: b.batchId,
          })
          expect(episodesOf(partial)).toEqual(["z"])
        }),
      )
    })

    it("serves an unconfirmed batch again after the batch timeout, a confirmed one never", async () => {
      await run((h) =>
        Effect.gen(function* () {
          yield* h.start({ batchAckTimeoutMs: 500 })
          yield* h.publish([
            ...episodeRecords(h.jobId, { episodeId: "e1" }).all,
            ...episodeRecords(h.jobId, { episodeId: "e2" }).all,
          ])
          const b1 = yield* h.take({ maxTrajectories: 2, waitMs: 10_000 })
          expect(episodesOf(b1)).toEqual(["e1", "e2"])
          // Not confirmed (a learner that died): served again once the batch times out.
          const b2 = yield* h.take({ maxTrajectories: 2, waitMs: 10_000 })
          expect(episodesOf(b2)).toEqual(["e1", "e2"])
          expect(b2.batchId).not.toBe(b1.batchId)
          expect(
            yield* h.metric("t1_buffer_batches_total", { event: "expired" }),
          ).toBeGreaterThanOrEqual(1)
          const b3 = yield* h.take({ maxTrajectories: 2, waitMs: 1000, ackBatchId: b2.batchId })
          expect(b3.trajectories).toEqual([])
        }),
      )
    })

    it("loses nothing across a restart: stored-unserved and served-unconfirmed trajectories are served after it", async () => {
      await run((h) =>
        Effect.gen(function* () {
          const e4 = episodeRecords(h.jobId, { episodeId: "e4", tokens: 20, chunkTokens: 5 })
          const first = yield* h.start()
          yield* h.publish([
            ...episodeRecords(h.jobId, { episodeId: "e1" }).all,
            ...episodeRecords(h.jobId, { episodeId: "e2" }).all,
            ...episodeRecords(h.jobId, { episodeId: "e3" }).all,
            ...e4.chunks.slice(0, 2),
          ])
          const b1 = yield* h.take({ maxTrajectories: 1, waitMs: 10_000 })
          expect(episodesOf(b1)).toEqual(["e1"])
          const b2 = yield* h.take({ maxTrajectories: 1, waitMs: 10_000, ackBatchId: b1.batchId })
          expect(episodesOf(b2)).toEqual(["e2"])
          yield* h.metricReaches("t1_buffer_assembling", {}, 1)
          // b2 is never confirmed: the buffer stops with e2 served, e3 stored, e4 incomplete.
          yield* Scope.close(first, Exit.void)
          yield* h.publish([...e4.chunks.slice(2), e4.end])
          yield* h.start()
          const b3 = yield* h.take({ maxTrajectories: 3, waitMs: 15_000 })
          expect(episodesOf(b3)).toEqual(["e2", "e3", "e4"])
          const t4 = b3.trajectories.find((t) => t.episodeId === "e4")
          expect(t4 ? idsOf(t4) : []).toEqual(Array.from(e4.ids))
          const b4 = yield* h.take({ maxTrajectories: 5, waitMs: 1000, ackBatchId: b3.batchId })
          expect(b4.trajectories).toEqual([])
        }),
      )
    })

    it("stores a trajectory larger than max_payload in the object store and serves a reference", async () => {
      await run((h) =>
        Effect.gen(function* () {
          const names = bufferNames(h.subjects, h.jobId)
          const tokens = Math.ceil(h.bus.maxPayload / 9) + 20_000
          const big = episodeRecords(h.jobId, {
            episodeId: "big",
            tokens,
            routing: false,
            chunkTokens: maxChunkTokens(h.bus.maxPayload, 0),
          })
          yield* h.start()
          yield* h.publish([...big.all, ...episodeRecords(h.jobId, { episodeId: "small" }).all])
          yield* h.metricReaches("t1_buffer_trajectories_in_total", {}, 2)
          // On the wire: one inline trajectory and one object-store reference.
          const request = create(TakeBatchRequestSchema, {
            jobId: h.jobId,
            maxTrajectories: 2,
            waitMs: 10_000,
          })
          const reply = yield* h.bus
            .request(names.take, toBinary(TakeBatchRequestSchema, request), { timeoutMs: 15_000 })
            .pipe(
              Effect.retry({
                while: (e) => e._tag === "NoResponders",
                schedule: Schedule.spaced("20 millis"),
                times: 500,
              }),
            )
          expect(reply.data.length).toBeLessThan(h.bus.maxPayload)
          const wire = fromBinary(BatchSchema, reply.data)
          expect(wire.trajectories.map((t) => t.episodeId)).toEqual(["small"])
          expect(wire.trajectoryRefs.map((r) => r.name)).toEqual([names.objectName("big")])
          const batch = yield* resolveBatch(h.bus, wire)
          expect(batch.trajectories.map((t) => t.episodeId)).toEqual(["small", "big"])
          expect(batch.weights).toEqual([1, 1])
          const t = batch.trajectories[1]
          expect(t?.tokenIds.length).toBe(tokens * 4)
          expect(t ? idsOf(t) : []).toEqual(Array.from(big.ids))
          // Confirmed: the object is deleted.
          yield* h.take({ waitMs: 0, ackBatchId: batch.batchId })
          const store = yield* h.bus.objectStore(names.objectBucket)
          const gone = yield* store.get(names.objectName("big")).pipe(
            Effect.repeat({
              until: Option.isNone,
              schedule: Schedule.spaced("25 millis"),
              times: 200,
            }),
          )
          expect(Option.isNone(gone)).toBe(true)
        }),
      )
    })

    it("expires incomplete trajectories and drops corrupt ones", async () => {
      await run((h) =>
        Effect.gen(function* () {
          yield* h.start({ expireAfterMs: 300 })
          const partial = episodeRecords(h.jobId, { episodeId: "p", tokens: 20, chunkTokens: 5 })
          const broken = episodeRecords(h.jobId, { episodeId: "c", tokens: 20, chunkTokens: 5 })
          const end = broken.end.record.record
          if (end.case !== "end") throw new Error("not an end record")
          // The end record claims one token more than the chunks hold.
          const lying = clone(EpisodeEndSchema, end.value)
          lying.totalTokens += 1
          const brokenEnd = endRecord(lying)
          yield* h.publish([
            ...partial.chunks.slice(0, 2),
            ...broken.chunks,
            { record: brokenEnd, msgId: "c-end" },
          ])
          expect(yield* h.metricReaches("t1_buffer_dropped_total", { reason: "corrupt" }, 1)).toBe(
            1,
          )
          expect(yield* h.metricReaches("t1_buffer_dropped_total", { reason: "expired" }, 1)).toBe(
            1,
          )
          expect(yield* h.metric("t1_buffer_bytes_held")).toBe(0)
          // Late records of the expired attempt are acked, never assembled.
          yield* h.publish([...partial.chunks.slice(2), partial.end])
          const b = yield* h.take({ maxTrajectories: 5, waitMs: 500 })
          expect(b.trajectories).toEqual([])
        }),
      )
    })
  })
}
