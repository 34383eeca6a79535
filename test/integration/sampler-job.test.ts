/**
 * A sampler given a job follows that job only (issue 39, item 4). Two stored jobs' episodes wait
 * on the work queue, published as the coordinator publishes them; a sampler started for job A
 * takes A's and never sees B's, which stay on the queue untouched (first delivery) for the next
 * sampler. On the in-memory bus and on a real NATS server (work-queue consumers must not overlap
 * there, which is why each stored job has a consumer of its own).
 */
import { randomBytes } from "node:crypto"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Effect, Layer, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { shellBlock } from "../../actors/sampler/actions/index.ts"
import { runSampler } from "../../actors/sampler/actor.ts"
import { samplerActor } from "../../actors/sampler/hosted.ts"
import { scriptedPolicy } from "../../actors/sampler/policy/scripted.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate } from "../../model/index.ts"
import {
  EpisodePurpose,
  type EpisodeWorkItem,
  EpisodeWorkItemSchema,
  JobKind,
  JobSpecSchema,
  JobState,
} from "../../proto/index.ts"
import {
  Bus,
  type BusError,
  MemoryBusLive,
  NatsBusLive,
  subjectsFor,
} from "../../services/bus/index.ts"
import {
  ensureJobEpisodes,
  ensureSamplerStreams,
  jobEpisodesSubject,
  jobSamplerDurable,
} from "../../services/episodes/index.ts"
import { makeJobStore } from "../../services/jobs/index.ts"
import { Metrics, makeMetrics } from "../../services/metrics/index.ts"
import { useNatsServer } from "../support/nats-url.ts"

const nats = useNatsServer()
const tokenizer = loadBundledTokenizer()

const until = (cond: () => boolean, what: string, timeoutMs = 10_000) =>
  Effect.gen(function* () {
    const start = Date.now()
    while (!cond()) {
      if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`)
      yield* Effect.sleep("20 millis")
    }
  })

/** Two stored jobs with two episodes each on the queue; samplers that record what they take. */
const scenario = Effect.scoped(
  Effect.gen(function* () {
    const bus = yield* Bus
    const subjects = subjectsFor(`sj${randomBytes(3).toString("hex")}`)
    const store = yield* makeJobStore(bus, subjects)
    const job = () =>
      Effect.gen(function* () {
        const { status } = yield* store.create(create(JobSpecSchema, { kind: JobKind.EVAL }))
        yield* store.transition(status.jobId, JobState.RUNNING)
        return status.jobId
      })
    const a = yield* job()
    const b = yield* job()
    yield* ensureSamplerStreams(bus, subjects)
    for (const jobId of [b, a, b, a]) {
      yield* ensureJobEpisodes(bus, subjects, jobId)
      const episodeId = `${jobId}-e${randomBytes(2).toString("hex")}`
      const item = create(EpisodeWorkItemSchema, {
        jobId,
        episodeId,
        purpose: EpisodePurpose.EVAL,
      })
      yield* bus.jsPublish(
        jobEpisodesSubject(subjects, jobId),
        toBinary(EpisodeWorkItemSchema, item),
        { msgId: `${episodeId}:0` },
      )
    }
    // Each sampler records the items it took; refusing them settles them without an episode.
    const taken = (into: Array<{ item: EpisodeWorkItem }>, job?: string) =>
      runSampler({
        subjects,
        policy: scriptedPolicy(tokenizer, () => []),
        template: new ChatTemplate(tokenizer),
        format: shellBlock,
        concurrency: 2,
        ...(job === undefined ? {} : { job }),
        admit: (item) => Effect.sync(() => into.push({ item })).pipe(Effect.as(false)),
      }).pipe(Effect.forkScoped)

    const byA: Array<{ item: EpisodeWorkItem }> = []
    yield* taken(byA, a)
    yield* until(() => byA.length >= 2, "job A's two episodes")
    // Time enough for a wrong delivery of B's episodes to show.
    yield* Effect.sleep("500 millis")
    const tookA = byA.map((t) => t.item.jobId)

    const byAny: Array<{ item: EpisodeWorkItem }> = []
    yield* taken(byAny)
    yield* until(() => byAny.length >= 2, "job B's two episodes, left on the queue")
    yield* Effect.sleep("300 millis")
    return { a, b, tookA, tookAfter: byAny.map((t) => t.item.jobId) }
  }),
)

const check = (r: Effect.Success<typeof scenario>) => {
  expect(r.tookA).toEqual([r.a, r.a])
  // B's episodes were never taken by A's sampler: the next sampler gets both, and nothing of A's.
  expect(r.tookAfter).toEqual([r.b, r.b])
}

const metrics = Layer.succeed(Metrics, makeMetrics({ defaultMetrics: false }))

/**
 * `t1 actor sampler --job A` as started by hand (the embedded TinyMoE following A): with no
 * sandbox host its episodes end as infra failures and are settled, A's queue empties, and B's two
 * episodes are still there, never delivered (first delivery to the next puller).
 */
const hosted = Effect.scoped(
  Effect.gen(function* () {
    const bus = yield* Bus
    const subjects = subjectsFor(`sh${randomBytes(3).toString("hex")}`)
    const store = yield* makeJobStore(bus, subjects)
    const ids: string[] = []
    for (let k = 0; k < 2; k++) {
      const { status } = yield* store.create(create(JobSpecSchema, { kind: JobKind.EVAL }))
      yield* store.transition(status.jobId, JobState.RUNNING)
      ids.push(status.jobId)
    }
    const [a = "", b = ""] = ids
    yield* ensureSamplerStreams(bus, subjects)
    for (const jobId of [b, a, b, a]) {
      yield* ensureJobEpisodes(bus, subjects, jobId)
      const episodeId = `${jobId}-e${randomBytes(2).toString("hex")}`
      // A task with no sandbox host to create it: the episode ends as an infra failure.
      const item = create(EpisodeWorkItemSchema, {
        jobId,
        episodeId,
        purpose: EpisodePurpose.EVAL,
        task: {
          id: "t",
          taskSet: "s",
          dockerImage: "local",
          workdir: "/app",
          expectedTestCount: 1,
        },
        limits: { maxTurns: 1 },
      })
      yield* bus.jsPublish(
        jobEpisodesSubject(subjects, jobId),
        toBinary(EpisodeWorkItemSchema, item),
        {
          msgId: `${episodeId}:0`,
        },
      )
    }
    const ends: string[] = []
    yield* bus.ensureConsumer({
      stream: subjects.trajectoriesStream,
      durable: "observer",
      ackWaitMs: 30_000,
      maxDeliver: 5,
    })
    yield* Effect.forkScoped(
      bus
        .consume(subjects.trajectoriesStream, "observer", { maxInFlight: 16 })
        .pipe(
          Stream.runForEach((w) =>
            Effect.sync(() => ends.push(w.subject)).pipe(Effect.andThen(w.ack)),
          ),
        ),
    )
    yield* Effect.forkScoped(
      samplerActor.run({ subjects, concurrency: 2, shutdownGraceMs: 1000 }, { job: a }),
    )
    yield* until(
      () => ends.filter((s) => s === subjects.trajectories(a)).length >= 2,
      "A's two ends",
      30_000,
    )
    const left = yield* bus
      .consume(subjects.episodesStream, jobSamplerDurable(b), { maxInFlight: 4 })
      .pipe(Stream.take(2), Stream.runCollect)
    return {
      b,
      aTrajectories: subjects.trajectories(a),
      endsOf: [...new Set(ends)],
      left: [...left].map((w) => ({
        job: fromBinary(EpisodeWorkItemSchema, w.data).jobId,
        deliveryCount: w.deliveryCount,
      })),
    }
  }),
)

describe("a sampler given a job takes only that job's episodes", () => {
  it("in-memory bus", async () => {
    check(
      await Effect.runPromise(
        scenario.pipe(Effect.provide(Layer.mergeAll(MemoryBusLive(), metrics))),
      ),
    )
  })

  it("NATS", async () => {
    check(
      await Effect.runPromise(
        scenario.pipe(
          Effect.provide(
            Layer.mergeAll(
              NatsBusLive({ servers: nats.url, name: "t1-sampler-job-test" }),
              metrics,
            ) as Layer.Layer<Bus | Metrics, BusError>,
          ),
        ),
      ),
    )
  }, 30_000)

  it("t1 actor sampler --job A leaves B's episodes undelivered", async () => {
    const r = await Effect.runPromise(
      hosted.pipe(Effect.provide(Layer.mergeAll(MemoryBusLive(), metrics))),
    )
    // Only A's episodes ran (their records are on A's trajectory subject).
    expect(r.endsOf).toEqual([r.aTrajectories])
    expect(r.left).toEqual([
      { job: r.b, deliveryCount: 1 },
      { job: r.b, deliveryCount: 1 },
    ])
  }, 60_000)
})
