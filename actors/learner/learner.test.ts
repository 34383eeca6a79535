import { create } from "@bufbuild/protobuf"
import { Effect, Layer, Option } from "effect"
import { describe, expect, it } from "vitest"
import { generateBatch, Rng, Sequence, TinyMoe } from "../../model/index.ts"
import { EpisodeEndSchema } from "../../proto/index.ts"
import {
  Bus,
  type BusShape,
  MemoryBusLive,
  type Subjects,
  subjectsFor,
} from "../../services/bus/index.ts"
import { Metrics, makeMetrics } from "../../services/metrics/index.ts"
import { runBuffer } from "../buffer/index.ts"
import { chunkMsgId, chunkRecord, encodeRecord, endMsgId, endRecord } from "../sampler/records.ts"
import { ensureSamplerStreams } from "../sampler/streams.ts"
import { TrajectoryBuilder } from "../sampler/tito.ts"
import { runLearner } from "./actor.ts"
import { DEFAULT_LEARNER_CONFIG } from "./trainer.ts"
import { followWeights } from "./weights.ts"

const config = {
  vocabSize: 8,
  dModel: 16,
  nLayers: 1,
  nHeads: 2,
  nExperts: 4,
  topK: 2,
  dFf: 16,
  maxSeqLen: 16,
}
const GOOD = 5

/** Streams `n` one-token episodes sampled from `model` onto the job's trajectory subject, as a sampler would. */
const publishEpisodes = (
  bus: BusShape,
  subjects: Subjects,
  job: string,
  model: TinyMoe,
  from: number,
  n: number,
  version: bigint,
) =>
  Effect.gen(function* () {
    const rng = new Rng(from)
    for (let e = from; e < from + n; e++) {
      const sequence = new Sequence(model)
      sequence.append([1, 2])
      const [g] = generateBatch(model, [
        {
          sequence,
          params: { temperature: 1, topP: 1, maxTokens: 1, stopTokenIds: new Set() },
          rng,
        },
      ])
      const token = g?.tokens[0] as number
      const b = new TrajectoryBuilder(version)
      b.startTurn()
      b.appendContext([1, 2])
      b.appendGenerated([token], [g?.logprobs[0] as number], version)
      b.addRouting({ start: 0, rows: sequence.routing(), layers: 1, topK: 2, numExperts: 4 })
      const span = b.takeSpan(true)
      const who = { jobId: job, episodeId: `ep-${e}`, attempt: 0 }
      if (span)
        yield* bus.jsPublish(subjects.trajectories(job), encodeRecord(chunkRecord(who, 0, span)), {
          msgId: chunkMsgId(who, 0),
        })
      const reward = token === GOOD ? 1 : 0
      const end = create(EpisodeEndSchema, {
        ...who,
        totalChunks: 1,
        totalTokens: 3,
        reward,
        resolved: reward === 1,
        admittedPolicyVersion: version,
        groupId: `g-${e}`,
        sampleIndex: 0,
      })
      yield* bus.jsPublish(subjects.trajectories(job), encodeRecord(endRecord(end)), {
        msgId: endMsgId(who),
      })
    }
  })

describe("learner actor with the buffer (in-memory bus)", () => {
  it("trains on buffered batches, announces every version, checkpoints, and resumes after a restart", async () => {
    const subjects = subjectsFor("learnertest")
    const job = "job-l"
    const initial = TinyMoe.create({ config, seed: 4 })
    const learnerConfig = { ...DEFAULT_LEARNER_CONFIG, lr: 1e-2, criticWarmupSteps: 1 }
    const seen: bigint[] = []
    const result = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          yield* ensureSamplerStreams(bus, subjects)
          yield* Effect.forkScoped(runBuffer({ subjects, jobId: job }))
          const follower = {
            version: 0n,
            setWeights: (_m: TinyMoe, v: bigint) => {
              follower.version = v
              seen.push(v)
            },
          }
          yield* followWeights(bus, subjects, job, follower)
          yield* publishEpisodes(bus, subjects, job, initial, 0, 24, 0n)
          const first = yield* runLearner({
            subjects,
            jobId: job,
            config: learnerConfig,
            initial,
            batchSize: 8,
            maxStaleness: 4,
            maxSteps: 3,
            checkpointEvery: 1,
          })
          // A new learner process: no initial weights of its own matter, it resumes from the checkpoint.
          yield* publishEpisodes(bus, subjects, job, initial, 100, 16, first.version)
          const fresh = TinyMoe.create({ config, seed: 99 })
          const second = yield* runLearner({
            subjects,
            jobId: job,
            config: learnerConfig,
            initial: fresh,
            batchSize: 8,
            maxStaleness: 4,
            maxSteps: 5,
          })
          const store = yield* bus.objectStore(subjects.weightsBucket)
          const v5 = yield* store.get(`${job}/v5.safetensors`)
          yield* Effect.sleep("200 millis")
          return { first, second, hasV5: Option.isSome(v5), fresh }
        }),
      ).pipe(
        Effect.provide(
          Layer.mergeAll(
            MemoryBusLive(),
            Layer.succeed(Metrics, makeMetrics({ defaultMetrics: false })),
          ),
        ),
      ),
    )
    expect(result.first).toEqual({ steps: 3, version: 3n })
    expect(result.second).toEqual({ steps: 5, version: 5n })
    expect(result.hasV5).toBe(true)
    expect(seen.at(-1)).toBe(5n)
    expect(seen).toEqual([...seen].sort((a, b) => (a < b ? -1 : 1)))
  }, 60_000)
})
