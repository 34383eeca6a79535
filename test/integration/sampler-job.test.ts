/**
 * A sampler given a job follows that job only (issue 39, item 4). Two stored jobs' episodes wait
 * on the work queue, published as the coordinator publishes them; a sampler started for job A
 * takes A's and never sees B's, which stay on the queue untouched (first delivery) for the next
 * sampler. On the in-memory bus and on a real NATS server (work-queue consumers must not overlap
 * there, which is why each stored job has a consumer of its own).
 */
import { randomBytes } from "node:crypto"
import { create, toBinary } from "@bufbuild/protobuf"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { shellBlock } from "../../actors/sampler/actions/index.ts"
import { runSampler } from "../../actors/sampler/actor.ts"
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
})
