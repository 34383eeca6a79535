/**
 * The coordinator against a bus (in-memory and NATS): an eval job end to end with a fake
 * sampler, a coordinator replaced mid-job, cancellation, and training with a fake learner.
 */
import { randomBytes } from "node:crypto"
import { readdirSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf"
import {
  Deferred,
  Effect,
  Fiber,
  type Layer,
  Option,
  Queue,
  Schedule,
  type Scope,
  Semaphore,
  Stream,
} from "effect"
import { describe, expect, it } from "vitest"
import {
  EpisodePurpose,
  type EpisodeWorkItem,
  EpisodeWorkItemSchema,
  ErrorCode,
  type JobEvent,
  JobEventSchema,
  JobKind,
  JobSpecSchema,
  JobState,
  type JobStatus,
  TrajectoryRecordSchema,
  WeightsAnnouncementSchema,
} from "../../proto/index.ts"
import {
  Bus,
  type BusError,
  type BusShape,
  JetStreamError,
  type Subjects,
  subjectsFor,
  type WorkItem,
} from "../../services/bus/index.ts"
import {
  ensureJobEpisodes,
  ensureSamplerStreams,
  jobSamplerDurable,
} from "../../services/episodes/index.ts"
import {
  isTerminalState,
  type JobStoreShape,
  jobEventsStream,
  makeJobStore,
} from "../../services/jobs/index.ts"
import { Metrics, type MetricsShape, makeMetrics } from "../../services/metrics/index.ts"
import { runAttempt } from "../sampler/actor.ts"
import { type CoordinatorOptions, runCoordinator } from "./actor.ts"
import { passAtK } from "./pass-at-k.ts"
import { episodeIndex } from "./plan.ts"

const EVAL_DIR = fileURLToPath(new URL("../../tasks/bundled/eval", import.meta.url))
/** The job's task order: sorted by `<task set>/<id>`, one task set here. */
const EVAL_TASKS = readdirSync(EVAL_DIR, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name)
  .sort()

interface World {
  readonly bus: BusShape
  readonly subjects: Subjects
  readonly store: JobStoreShape
  readonly metrics: MetricsShape
}

/** Outcome of one run of a work item, as the fake sampler reports it. */
interface Verdict {
  readonly reward?: number
  readonly resolved?: boolean
  readonly infra?: boolean
  /** The verifier could not score it: its tests need these packages, which the sandbox lacks. */
  readonly missing?: ReadonlyArray<string>
}

const FAST: Omit<CoordinatorOptions, "subjects"> = {
  resolveImage: () => Effect.succeed("t1-base:latest"),
  leaseTtlMs: 600,
  tickMs: 40,
  ackWaitMs: 400,
  cancelGraceMs: 10_000,
}

const coordinator = (w: World, options: Partial<CoordinatorOptions> = {}) =>
  Effect.forkChild(
    runCoordinator({ subjects: w.subjects, ...FAST, ...options }).pipe(
      Effect.provideService(Bus, w.bus),
      Effect.provideService(Metrics, w.metrics),
    ),
  )

/** Submits a job as the gateway's SubmitJob does: PENDING, with its first event. */
const submit = (w: World, spec: MessageInitShape<typeof JobSpecSchema>) =>
  Effect.gen(function* () {
    const { status } = yield* w.store.create(create(JobSpecSchema, spec))
    return status.jobId
  })

/** The job's status once it is terminal. */
const awaitFinal = (w: World, jobId: string, timeoutMs = 15_000) =>
  Effect.scoped(
    Effect.gen(function* () {
      const changes = yield* w.store.storedChanges
      const found = yield* changes.pipe(
        Stream.filter(
          (c) => c._tag === "Put" && c.job.jobId === jobId && isTerminalState(c.job.status.state),
        ),
        Stream.runHead,
        Effect.timeout(timeoutMs),
      )
      if (Option.isNone(found) || found.value._tag !== "Put") throw new Error("no final status")
      return found.value.job.status
    }),
  )

/** Every event of a job, in stream order, through its terminal state change. */
const readEvents = (w: World, jobId: string) =>
  Effect.gen(function* () {
    const durable = `test-${jobId}`
    yield* w.bus.ensureConsumer({
      stream: jobEventsStream(w.subjects),
      durable,
      filterSubject: w.subjects.jobEvents(jobId),
      ackWaitMs: 30_000,
      maxDeliver: -1,
    })
    return yield* w.bus.consume(jobEventsStream(w.subjects), durable).pipe(
      Stream.mapEffect((item) =>
        Effect.as(item.ack, fromBinary(JobEventSchema, item.data) as JobEvent),
      ),
      Stream.takeUntil(
        (e) => e.event.case === "stateChanged" && isTerminalState(e.event.value.state),
      ),
      Stream.runCollect,
      Effect.timeout("10 seconds"),
    )
  })

interface FakeSampler {
  readonly received: EpisodeWorkItem[]
  /** Each work item as it arrives. */
  readonly arrivals: Queue.Queue<EpisodeWorkItem>
  maxInFlight: number
}

/**
 * Pulls work items like the sampler pool and, for each, publishes one run per verdict (a chunk
 * and an end record, numbered as the sampler numbers redelivered runs), then acks the item.
 */
const fakeSampler = (
  w: World,
  decide: (item: EpisodeWorkItem) => Effect.Effect<ReadonlyArray<Verdict>>,
  concurrency = 1,
) =>
  Effect.gen(function* () {
    yield* ensureSamplerStreams(w.bus, w.subjects)
    const state: FakeSampler = {
      received: [],
      arrivals: yield* Queue.unbounded<EpisodeWorkItem>(),
      maxInFlight: 0,
    }
    let inFlight = 0
    const run = (work: WorkItem) =>
      Effect.gen(function* () {
        const item = fromBinary(EpisodeWorkItemSchema, work.data)
        state.received.push(item)
        inFlight += 1
        state.maxInFlight = Math.max(state.maxInFlight, inFlight)
        yield* Queue.offer(state.arrivals, item)
        const verdicts = yield* decide(item)
        for (const [delivery, v] of verdicts.entries()) {
          const attempt = runAttempt(item, delivery + 1)
          const who = { jobId: item.jobId, episodeId: item.episodeId, attempt }
          const stream = w.subjects.trajectories(item.jobId)
          const chunk = create(TrajectoryRecordSchema, {
            record: { case: "chunk", value: { ...who, seq: 0, tokenStart: 0, tokenEnd: 0 } },
          })
          yield* w.bus.jsPublish(stream, toBinary(TrajectoryRecordSchema, chunk), {
            msgId: `${item.episodeId}:${attempt}:0`,
          })
          const end = create(TrajectoryRecordSchema, {
            record: {
              case: "end",
              value: {
                ...who,
                totalChunks: 1,
                reward: v.reward ?? 0,
                resolved: v.resolved ?? false,
                infraFailed: v.infra ?? false,
                unverifiable: v.missing !== undefined,
                missingPackages: [...(v.missing ?? [])],
                ...(item.taskRef ? { task: item.taskRef } : {}),
                groupId: item.groupId,
                sampleIndex: item.sampleIndex,
                admittedPolicyVersion: item.admittedPolicyVersion,
              },
            },
          })
          yield* w.bus.jsPublish(stream, toBinary(TrajectoryRecordSchema, end), {
            msgId: `${item.episodeId}:${attempt}:end`,
          })
        }
        inFlight -= 1
        yield* work.ack
      })
    // Each stored job's episodes are on its own queue, as the sampler pool pulls them.
    const permits = yield* Semaphore.make(concurrency)
    const pulled = new Set<string>()
    yield* w.store.changes.pipe(
      Stream.filter((status) => !pulled.has(status.jobId)),
      Stream.runForEach((status) =>
        Effect.gen(function* () {
          pulled.add(status.jobId)
          yield* ensureJobEpisodes(w.bus, w.subjects, status.jobId)
          yield* w.bus
            .consume(w.subjects.episodesStream, jobSamplerDurable(status.jobId), {
              maxInFlight: 64,
            })
            .pipe(
              Stream.mapEffect((work) => permits.withPermit(run(work)), {
                concurrency: "unbounded",
                unordered: true,
              }),
              Stream.runDrain,
              Effect.forkChild,
            )
        }),
      ),
      Effect.forkChild,
    )
    return state
  })

const taskPos = (item: EpisodeWorkItem) => EVAL_TASKS.indexOf(item.taskRef?.taskId ?? "")

const counter = async (m: MetricsShape, name: string, labels: Record<string, string> = {}) => {
  const metric = m.registry.getSingleMetric(name)
  if (metric === undefined) return 0
  const { values } = await metric.get()
  return values
    .filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))
    .reduce((s, v) => s + v.value, 0)
}

const expectContiguous = (events: ReadonlyArray<JobEvent>, status: JobStatus) => {
  expect(events.map((e) => Number(e.seq))).toEqual(events.map((_, i) => i + 1))
  expect(status.lastEventSeq).toBe(BigInt(events.length))
}

export const coordinatorContract = (
  name: string,
  layer: () => Layer.Layer<Bus, BusError>,
): void => {
  const world = <A, E>(body: (w: World) => Effect.Effect<A, E, Scope.Scope>) =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          const subjects = subjectsFor(`c${randomBytes(3).toString("hex")}`)
          const store = yield* makeJobStore(bus, subjects)
          return yield* body({
            bus,
            subjects,
            store,
            metrics: makeMetrics({ defaultMetrics: false }),
          })
        }),
      ).pipe(Effect.provide(layer())),
    )

  describe(`coordinator (${name})`, () => {
    it("runs an eval job end to end: retries, duplicate ends, resolved rate and pass@k", () =>
      world((w) =>
        Effect.gen(function* () {
          // Tasks 0–1 resolve on both samples, 2–4 on sample 0 only, 5–7 never. Task 2 sample 0
          // fails for infra reasons once; task 7 sample 1 on every attempt; task 0 sample 1's
          // end arrives twice (a redelivered run that scored differently: the first counts).
          const sampler = yield* fakeSampler(w, (item) =>
            Effect.sync((): Verdict[] => {
              const t = taskPos(item)
              const s = item.sampleIndex
              if (t === 7 && s === 1) return [{ infra: true }]
              if (t === 2 && s === 0 && item.attempt === 0) return [{ infra: true }]
              const resolved = t <= 1 || (t <= 4 && s === 0)
              const verdict = { resolved, reward: resolved ? 8 : 3 }
              return t === 0 && s === 1 ? [verdict, { resolved: false, reward: 0 }] : [verdict]
            }),
          )
          // Two coordinators: the job's lease lets one of them run it.
          yield* coordinator(w)
          yield* coordinator(w)
          const jobId = yield* submit(w, {
            name: "eval",
            kind: JobKind.EVAL,
            taskSet: EVAL_DIR,
            samplesPerTask: 2,
            maxConcurrentEpisodes: 3,
            policyRef: "tinymoe:init",
            sampling: { temperature: 1, seed: 11n },
          })
          const status = yield* awaitFinal(w, jobId)
          expect(status.state).toBe(JobState.SUCCEEDED)
          expect(status.counts).toMatchObject({
            episodesTotal: 16,
            episodesFinished: 15,
            episodesFailed: 1,
            episodesInfraRetried: 3,
            episodesRunning: 0,
          })
          expect(status.resolvedRate).toBeCloseTo(7 / 15, 12)
          expect(status.rewardMean).toBeCloseTo((7 * 8 + 8 * 3) / 15, 12)

          const events = yield* readEvents(w, jobId)
          expectContiguous(events, status)
          const cases = events.map((e) => e.event.case)
          expect(cases.slice(0, 3)).toEqual(["stateChanged", "admitted", "stateChanged"])
          expect(cases.filter((c) => c === "episodeFinished")).toHaveLength(16)
          expect(cases.slice(-2)).toEqual(["evaluation", "stateChanged"])
          const evaluation = events.at(-2)?.event
          if (evaluation?.case !== "evaluation") throw new Error("no evaluation event")
          // pass@1 over 8 tasks: 1, 1, ½, ½, ½, 0, 0, 0 (task 7 has one scored sample).
          expect(evaluation.value.passAtK[1]).toBeCloseTo(3.5 / 8, 12)
          // pass@2 over the 7 tasks with 2 scored samples: five of them resolve.
          expect(evaluation.value.passAtK[2]).toBeCloseTo(5 / 7, 12)
          expect(evaluation.value.passAtK[1]).toBeCloseTo(
            (2 * passAtK(2, 2, 1) +
              3 * passAtK(2, 1, 1) +
              2 * passAtK(2, 0, 1) +
              passAtK(1, 0, 1)) /
              8,
            12,
          )
          expect(evaluation.value.resolvedRate).toBeCloseTo(7 / 15, 12)
          expect({ tasks: evaluation.value.tasks, episodes: evaluation.value.episodes }).toEqual({
            tasks: 8,
            episodes: 15,
          })
          const failed = events.flatMap((e) =>
            e.event.case === "episodeFinished" && e.event.value.infraFailed ? [e.event.value] : [],
          )
          expect(failed).toHaveLength(1)
          expect(failed[0]).toMatchObject({ taskId: EVAL_TASKS[7], attempt: 2 })

          // Work items: each (episode, attempt) once, with the job's purpose, group and policy.
          const runs = sampler.received.map((i) => `${i.episodeId}:${i.attempt}`)
          expect(new Set(runs).size).toBe(runs.length)
          expect(runs).toHaveLength(16 + 3)
          expect(sampler.maxInFlight).toBeLessThanOrEqual(3)
          for (const item of sampler.received) {
            expect(item.purpose).toBe(EpisodePurpose.EVAL)
            expect(item.policyRef).toBe("tinymoe:init")
            expect(item.groupSize).toBe(2)
            expect(item.groupId).toBe(`${jobId}:${item.task?.id}:0`)
            expect(item.task?.dockerImage).toBe("t1-base:latest")
          }
          const seeds = new Set(sampler.received.map((i) => i.sampling?.seed))
          expect(seeds.size).toBe(runs.length)

          const m = w.metrics
          // The jobs gauge follows the store (both coordinators report to this registry).
          yield* Effect.promise(() =>
            counter(m, "t1_coordinator_jobs", { state: "succeeded" }),
          ).pipe(
            Effect.repeat({ until: (n) => n === 1, schedule: Schedule.spaced("20 millis") }),
            Effect.timeout(5000),
          )
          expect(
            yield* Effect.promise(() => counter(m, "t1_coordinator_jobs", { state: "running" })),
          ).toBe(0)
          expect(
            yield* Effect.promise(() => counter(m, "t1_coordinator_episodes_admitted_total")),
          ).toBe(16)
          expect(
            yield* Effect.promise(() => counter(m, "t1_coordinator_episodes_retried_total")),
          ).toBe(3)
          for (const [result, n] of [
            ["resolved", 7],
            ["unresolved", 8],
            ["failed", 1],
          ] as const)
            expect(
              yield* Effect.promise(() =>
                counter(m, "t1_coordinator_episodes_finished_total", { result }),
              ),
            ).toBe(n)
        }),
      ))

    it("finishes unverifiable episodes without retrying them and leaves them out of every rate", () =>
      world((w) =>
        Effect.gen(function* () {
          // Task 0's tests need numpy on both samples; task 1's sample 0 fails for infra reasons
          // once; the others resolve on sample 0 only.
          const sampler = yield* fakeSampler(w, (item) =>
            Effect.sync((): Verdict[] => {
              const t = taskPos(item)
              if (t === 0) return [{ missing: ["numpy"] }]
              if (t === 1 && item.sampleIndex === 0 && item.attempt === 0) return [{ infra: true }]
              const resolved = item.sampleIndex === 0
              return [{ resolved, reward: resolved ? 2 : 1 }]
            }),
          )
          yield* coordinator(w)
          const jobId = yield* submit(w, {
            name: "eval-unverifiable",
            kind: JobKind.EVAL,
            taskSet: EVAL_DIR,
            samplesPerTask: 2,
            maxConcurrentEpisodes: 4,
            policyRef: "tinymoe:init",
          })
          const status = yield* awaitFinal(w, jobId)
          expect(status.state).toBe(JobState.SUCCEEDED)
          const scored = 2 * EVAL_TASKS.length - 2
          expect(status.counts).toMatchObject({
            episodesTotal: 2 * EVAL_TASKS.length,
            episodesFinished: scored,
            episodesUnverifiable: 2,
            episodesFailed: 0,
            episodesInfraRetried: 1,
          })
          expect(status.resolvedRate).toBeCloseTo(0.5, 12)
          expect(status.rewardMean).toBeCloseTo(1.5, 12)
          // Unverifiable episodes ran once: only the infra failure was re-issued.
          expect(sampler.received).toHaveLength(2 * EVAL_TASKS.length + 1)
          expect(sampler.received.filter((i) => taskPos(i) === 0).map((i) => i.attempt)).toEqual([
            0, 0,
          ])

          const events = yield* readEvents(w, jobId)
          expectContiguous(events, status)
          const unverifiable = events.flatMap((e) =>
            e.event.case === "episodeFinished" && e.event.value.unverifiable ? [e.event.value] : [],
          )
          expect(unverifiable.map((f) => [f.taskId, f.missingPackages, f.infraFailed])).toEqual([
            [EVAL_TASKS[0], ["numpy"], false],
            [EVAL_TASKS[0], ["numpy"], false],
          ])
          const evaluation = events.at(-2)?.event
          if (evaluation?.case !== "evaluation") throw new Error("no evaluation event")
          const v = evaluation.value
          expect({ episodes: v.episodes, tasks: v.tasks, unverifiable: v.unverifiable }).toEqual({
            episodes: scored,
            tasks: EVAL_TASKS.length - 1,
            unverifiable: 2,
          })
          expect(v.resolvedRate).toBeCloseTo(0.5, 12)
          expect(v.passAtK[1]).toBeCloseTo(0.5, 12)
          expect(v.passAtK[2]).toBeCloseTo(1, 12)
          expect(v.perTask[0]).toMatchObject({
            samples: 0,
            unverifiable: 2,
            missingPackages: ["numpy"],
          })
          expect(v.perTask.slice(1).every((t) => t.unverifiable === 0 && t.samples === 2)).toBe(
            true,
          )
          expect(
            yield* Effect.promise(() =>
              counter(w.metrics, "t1_coordinator_episodes_finished_total", {
                result: "unverifiable",
              }),
            ),
          ).toBe(2)
          expect(
            yield* Effect.promise(() =>
              counter(w.metrics, "t1_coordinator_episodes_retried_total"),
            ),
          ).toBe(1)
        }),
      ))

    it("a coordinator stopped mid-job is replaced by another that finishes it with exact counts", () =>
      world((w) =>
        Effect.gen(function* () {
          const halfway = yield* Deferred.make<void>()
          const resume = yield* Deferred.make<void>()
          let ended = 0
          const sampler = yield* fakeSampler(
            w,
            (item) =>
              Effect.gen(function* () {
                // After 6 episodes the samplers stall until the replacement runs.
                if (ended >= 6) {
                  yield* Deferred.succeed(halfway, undefined)
                  yield* Deferred.await(resume)
                }
                ended += 1
                const resolved = item.sampleIndex === 0
                return [{ resolved, reward: resolved ? 8 : 2 }]
              }),
            2,
          )
          // Stopped like a crash: the lease is not given back and must expire.
          const first = yield* coordinator(w, { releaseOnShutdown: false, instanceId: "first" })
          const jobId = yield* submit(w, {
            kind: JobKind.EVAL,
            taskSet: EVAL_DIR,
            samplesPerTask: 2,
            maxConcurrentEpisodes: 4,
          })
          yield* Deferred.await(halfway)
          yield* Fiber.interrupt(first)
          const stoppedAt = yield* w.store.getStored(jobId)
          yield* coordinator(w, { instanceId: "second" })
          yield* Deferred.succeed(resume, undefined)
          const status = yield* awaitFinal(w, jobId)

          expect(Option.getOrThrow(stoppedAt).status.state).toBe(JobState.RUNNING)
          expect(status.state).toBe(JobState.SUCCEEDED)
          expect(status.counts).toMatchObject({
            episodesTotal: 16,
            episodesFinished: 16,
            episodesFailed: 0,
            episodesInfraRetried: 0,
            episodesRunning: 0,
          })
          expect(status.resolvedRate).toBeCloseTo(0.5, 12)
          // Nothing admitted twice: every episode reached the samplers once.
          const ids = sampler.received.map((i) => i.episodeId)
          expect(new Set(ids).size).toBe(16)
          expect(ids).toHaveLength(16)
          const events = yield* readEvents(w, jobId)
          expectContiguous(events, status)
          const finished = events.flatMap((e) =>
            e.event.case === "episodeFinished" ? [e.event.value.episodeId] : [],
          )
          expect(finished).toHaveLength(16)
          expect(new Set(finished).size).toBe(16)
          expect(events.filter((e) => e.event.case === "admitted")).toHaveLength(1)
          const evaluation = events.at(-2)?.event
          if (evaluation?.case !== "evaluation") throw new Error("no evaluation event")
          expect(evaluation.value.passAtK[1]).toBeCloseTo(0.5, 12)
          expect(evaluation.value.passAtK[2]).toBeCloseTo(1, 12)
        }),
      ))

    it("recovers from failures between its ledger, its events and its status, counting nothing twice", () =>
      world((w) =>
        Effect.gen(function* () {
          // Every 5th status write and every 7th event publish is stored but reported failed
          // (a lost ack): the job's manager fails, takes its lease again and resumes from KV.
          let updates = 0
          let publishes = 0
          const lostAck = (operation: string) =>
            new JetStreamError({ operation, reason: "injected: ack lost" })
          const flaky: JobStoreShape = {
            ...w.store,
            compareAndSet: (jobId, status, revision) =>
              w.store
                .compareAndSet(jobId, status, revision)
                .pipe(
                  Effect.flatMap((r) =>
                    ++updates % 5 === 0 ? Effect.fail(lostAck("update")) : Effect.succeed(r),
                  ),
                ),
            publishEvent: (event) =>
              w.store
                .publishEvent(event)
                .pipe(
                  Effect.flatMap((ack) =>
                    ++publishes % 7 === 0 ? Effect.fail(lostAck("publish")) : Effect.succeed(ack),
                  ),
                ),
          }
          const sampler = yield* fakeSampler(w, (item) =>
            Effect.succeed(
              taskPos(item) === 3 && item.attempt === 0
                ? [{ infra: true }]
                : [{ resolved: item.sampleIndex === 1, reward: item.sampleIndex + 1 }],
            ),
          )
          yield* coordinator(w, { store: flaky })
          const jobId = yield* submit(w, {
            kind: JobKind.EVAL,
            taskSet: EVAL_DIR,
            samplesPerTask: 2,
            maxConcurrentEpisodes: 3,
          })
          const status = yield* awaitFinal(w, jobId, 20_000)
          expect(updates).toBeGreaterThanOrEqual(5)
          expect(publishes).toBeGreaterThanOrEqual(7)
          expect(status.state).toBe(JobState.SUCCEEDED)
          expect(status.counts).toMatchObject({
            episodesTotal: 16,
            episodesFinished: 16,
            episodesFailed: 0,
            episodesInfraRetried: 2,
            episodesRunning: 0,
          })
          expect(status.resolvedRate).toBeCloseTo(0.5, 12)
          const events = yield* readEvents(w, jobId)
          expectContiguous(events, status)
          const finished = events.flatMap((e) =>
            e.event.case === "episodeFinished" ? [e.event.value.episodeId] : [],
          )
          expect(finished).toHaveLength(16)
          expect(new Set(finished).size).toBe(16)
          const runs = sampler.received.map((i) => `${i.episodeId}:${i.attempt}`)
          expect(new Set(runs).size).toBe(runs.length)
          expect(runs).toHaveLength(18)
        }),
      ))

    it("fails a job whose spec cannot run, with the reason", () =>
      world((w) =>
        Effect.gen(function* () {
          yield* coordinator(w)
          const noKind = yield* submit(w, { taskSet: EVAL_DIR })
          const noTasks = yield* submit(w, { kind: JobKind.EVAL, taskSet: `${EVAL_DIR}-missing` })
          const unknownTask = yield* submit(w, {
            kind: JobKind.EVAL,
            taskSet: EVAL_DIR,
            taskIds: ["no-such-task"],
          })
          for (const [jobId, code, text] of [
            [noKind, ErrorCode.INVALID_ARGUMENT, "spec.kind"],
            [noTasks, ErrorCode.UNAVAILABLE, "missing"],
            [unknownTask, ErrorCode.INVALID_ARGUMENT, "spec.task_ids[0]"],
          ] as const) {
            const status = yield* awaitFinal(w, jobId)
            expect(status.state).toBe(JobState.FAILED)
            expect(status.error?.code).toBe(code)
            expect(status.error?.message).toContain(text)
            const events = yield* readEvents(w, jobId)
            expectContiguous(events, status)
            const last = events.at(-1)?.event
            expect(last?.case === "stateChanged" && last.value.previousState).toBe(JobState.PENDING)
          }
        }),
      ))

    it("a cancelled job stops admitting and ends CANCELLED when its episodes end, or after the grace", () =>
      world((w) =>
        Effect.gen(function* () {
          const release = yield* Deferred.make<void>()
          const sampler = yield* fakeSampler(
            w,
            (item) =>
              Effect.gen(function* () {
                // The first job's episodes end when released; the second job's never do.
                if (item.jobId === slow) yield* Effect.never
                yield* Deferred.await(release)
                return [{ resolved: true, reward: 8 }]
              }),
            8,
          )
          yield* coordinator(w, { cancelGraceMs: 400 })
          const spec = {
            kind: JobKind.EVAL,
            taskSet: EVAL_DIR,
            samplesPerTask: 2,
            maxConcurrentEpisodes: 2,
          }
          const slow = yield* submit(w, spec)
          const graceful = yield* submit(w, spec)
          const running = new Map<string, number>()
          while ([...running.values()].reduce((a, b) => a + b, 0) < 4) {
            const item = yield* Queue.take(sampler.arrivals)
            running.set(item.jobId, (running.get(item.jobId) ?? 0) + 1)
          }
          // The stuck job's episodes never end: it is CANCELLED after the grace period.
          const asked = Date.now()
          yield* w.store.cancel(slow, "stuck")
          expect((yield* awaitFinal(w, slow)).state).toBe(JobState.CANCELLED)
          expect(Date.now() - asked).toBeGreaterThanOrEqual(400)
          // The other's end when released, long before its grace is out.
          yield* w.store.cancel(graceful, "enough")
          expect(Option.getOrThrow(yield* w.store.getStored(graceful)).status.state).toBe(
            JobState.RUNNING,
          )
          yield* Deferred.succeed(release, undefined)
          const status = yield* awaitFinal(w, graceful)
          expect(status.state).toBe(JobState.CANCELLED)
          expect(status.error?.message).toBe("enough")
          expect(status.counts).toMatchObject({
            episodesTotal: 16,
            episodesFinished: 2,
            episodesRunning: 0,
          })
          const stuck = Option.getOrThrow(yield* w.store.getStored(slow)).status
          expect(stuck.counts).toMatchObject({ episodesFinished: 0, episodesRunning: 0 })
          expect(stuck.error?.message).toBe("stuck")
          // Nothing was admitted after the cancel requests.
          expect(sampler.received).toHaveLength(4)
          const events = yield* readEvents(w, graceful)
          expectContiguous(events, status)
          const last = events.at(-1)?.event
          expect(last?.case === "stateChanged" && last.value.previousState).toBe(JobState.RUNNING)
        }),
      ))

    it("admits training episodes within the staleness bound while a fake learner advances", () =>
      world((w) =>
        Effect.gen(function* () {
          const batch = 4
          const eta = 1
          let learnerStep = 0
          const weights = yield* w.bus.kv(w.subjects.weightsBucket)
          const announce = (jobId: string, step: number) =>
            weights.put(
              `${jobId}.latest`,
              toBinary(
                WeightsAnnouncementSchema,
                create(WeightsAnnouncementSchema, {
                  jobId,
                  policyVersion: BigInt(step),
                  step: BigInt(step),
                }),
              ),
            )
          let jobOf = ""
          const violations: string[] = []
          const sampler = yield* fakeSampler(
            w,
            (item) =>
              Effect.gen(function* () {
                // Every admission is within η versions of the learner's step at the time.
                const index = episodeIndex(item.jobId, item.episodeId) ?? -1
                if (index >= (eta + Number(item.admittedPolicyVersion) + 1) * batch)
                  violations.push(`${item.episodeId} admitted at v${item.admittedPolicyVersion}`)
                yield* Effect.sleep(`${(index * 7) % 13} millis`)
                return [{ resolved: index % 3 === 0, reward: index % 5 }]
              }),
            4,
          )
          yield* coordinator(w)
          const jobId = yield* submit(w, {
            kind: JobKind.TRAIN,
            taskSet: EVAL_DIR,
            samplesPerTask: 2,
            maxConcurrentEpisodes: 5,
            learner: {
              batchTrajectories: batch,
              maxStaleness: eta,
              criticWarmupSteps: 1,
              ppoSteps: 3,
            },
          })
          jobOf = jobId
          yield* announce(jobId, 0)
          // The fake learner: one step (one new version) per batch of scored episodes.
          yield* Effect.scoped(
            Effect.gen(function* () {
              const changes = yield* w.store.storedChanges
              yield* changes.pipe(
                Stream.runForEach((c) =>
                  Effect.gen(function* () {
                    if (c._tag !== "Put" || c.job.jobId !== jobOf) return
                    const finished = c.job.status.counts?.episodesFinished ?? 0
                    while (finished >= (learnerStep + 1) * batch && learnerStep < 4) {
                      learnerStep += 1
                      yield* announce(jobId, learnerStep)
                    }
                  }),
                ),
                Effect.forkScoped,
              )
              const status = yield* awaitFinal(w, jobId)
              expect(status.state).toBe(JobState.SUCCEEDED)
              expect(status.learnerStep).toBe(4n)
              expect(status.policyVersion).toBe(4n)
              const admitted = status.counts?.episodesTotal ?? 0
              expect(admitted).toBe(new Set(sampler.received.map((i) => i.episodeId)).size)
              expect(admitted).toBeGreaterThanOrEqual(4 * batch)
              expect(admitted).toBeLessThanOrEqual((eta + 4 + 1) * batch)
              expect(sampler.maxInFlight).toBeLessThanOrEqual(5)
              expect(violations).toEqual([])
              for (const item of sampler.received) {
                expect(item.purpose).toBe(EpisodePurpose.TRAIN)
                expect(item.policyRef).toBe("")
              }
              // Rounds follow each other through the task set, each task k times per round.
              const rounds = new Map<string, number>()
              for (const i of sampler.received)
                rounds.set(i.groupId, (rounds.get(i.groupId) ?? 0) + 1)
              for (const [group, n] of rounds) {
                expect(group).toMatch(new RegExp(`^${jobId}:[^:]+:[0-9]+$`))
                expect(n).toBeLessThanOrEqual(2)
              }
              const events = yield* readEvents(w, jobId)
              expectContiguous(events, status)
            }),
          )
        }),
      ))
  })
}
