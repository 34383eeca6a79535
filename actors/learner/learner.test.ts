import { create } from "@bufbuild/protobuf"
import { Effect, Layer, Option } from "effect"
import { describe, expect, it } from "vitest"
import {
  generateBatch,
  mapParams,
  optimizerFor,
  Rng,
  Sequence,
  TinyMoe,
} from "../../model/index.ts"
import { EpisodeEndSchema } from "../../proto/index.ts"
import {
  Bus,
  type BusShape,
  MemoryBusLive,
  type Subjects,
  subjectsFor,
} from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import { Metrics, makeMetrics } from "../../services/metrics/index.ts"
import { followWeights } from "../../services/weights/index.ts"
import { runBuffer } from "../buffer/index.ts"
import { chunkMsgId, chunkRecord, encodeRecord, endMsgId, endRecord } from "../sampler/records.ts"
import { TrajectoryBuilder } from "../sampler/tito.ts"
import { runLearner, type StepReport } from "./actor.ts"
import { loadCheckpoint, saveCheckpoint } from "./checkpoint.ts"
import type { TrainingSequence } from "./decode.ts"
import { DEFAULT_LEARNER_CONFIG, Trainer } from "./trainer.ts"

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
/** A golden sequence: the prompt, then GOOD. */
const GOLD: TrainingSequence = {
  episodeId: "gold",
  ids: Uint32Array.of(1, 2, GOOD),
  lossMask: Uint8Array.of(0, 0, 1),
  logprobs: new Float32Array(3),
  routing: undefined,
  reward: 1,
  resolved: true,
  staleness: 0n,
}

/** Streams `n` one-token episodes sampled from `model` onto the job's trajectory subject, as a sampler would. */
const publishEpisodes = (
  bus: BusShape,
  subjects: Subjects,
  job: string,
  model: TinyMoe,
  from: number,
  n: number,
  version: bigint,
  o: {
    readonly groupSize?: number
    readonly reward?: (token: number, episode: number) => number
  } = {},
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
        yield* bus.jsPublish(
          subjects.trajectories(job),
          encodeRecord(chunkRecord(who, 0, span, Date.now())),
          {
            msgId: chunkMsgId(who, 0),
          },
        )
      const reward = o.reward ? o.reward(token, e) : token === GOOD ? 1 : 0
      const k = o.groupSize ?? 1
      const end = create(EpisodeEndSchema, {
        ...who,
        totalChunks: 1,
        totalTokens: 3,
        reward,
        resolved: reward === 1,
        admittedPolicyVersion: version,
        groupId: `g-${Math.floor(e / k)}`,
        sampleIndex: e % k,
        testsPassed: reward,
        testsTotal: 1,
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
    const learnerConfig = {
      ...DEFAULT_LEARNER_CONFIG,
      lr: 1e-2,
      criticLr: 1e-2,
      criticWarmupSteps: 1,
    }
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

const layers = Layer.mergeAll(
  MemoryBusLive(),
  Layer.succeed(Metrics, makeMetrics({ defaultMetrics: false })),
)

const snapshot = (model: TinyMoe) => model.entries().map((e) => Float64Array.from(e.data))
const same = (a: Float64Array[], b: Float64Array[]) =>
  a.every((x, i) => x.every((v, j) => v === (b[i]?.[j] as number)))

describe("learner actor: warm start, publication, filters and weights (in-memory bus)", () => {
  it("runs sft_steps on the golden set before its first announcement, then publishes every publish_every_steps", async () => {
    const subjects = subjectsFor("learnersft")
    const job = "job-sft"
    const initial = TinyMoe.create({ config, seed: 4 })
    const before = snapshot(initial)
    const golden: TrainingSequence[] = [GOLD]
    let asked = 0
    const seen: Array<{ version: bigint; weights: Float64Array[] }> = []
    const result = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          yield* ensureSamplerStreams(bus, subjects)
          yield* Effect.forkScoped(runBuffer({ subjects, jobId: job }))
          yield* followWeights(bus, subjects, job, {
            version: -1n,
            setWeights: (m: TinyMoe, v: bigint) => {
              seen.push({ version: v, weights: snapshot(m) })
            },
          })
          yield* publishEpisodes(bus, subjects, job, initial, 0, 16, 0n)
          const out = yield* runLearner({
            subjects,
            jobId: job,
            config: {
              ...DEFAULT_LEARNER_CONFIG,
              criticWarmupSteps: 0,
              sftSteps: 5,
              sftLr: 1e-2,
              publishEverySteps: 2,
            },
            initial,
            batchSize: 4,
            maxStaleness: 4,
            maxSteps: 3,
            golden: Effect.sync(() => {
              asked++
              return golden
            }),
          })
          yield* Effect.sleep("200 millis")
          return out
        }),
      ).pipe(Effect.provide(layers)),
    )
    expect(result).toEqual({ steps: 3, version: 3n })
    expect(asked).toBe(1)
    // v0 is the warm-started policy (announced once), then every 2nd version and the last.
    expect(seen.map((s) => s.version)).toEqual([0n, 2n, 3n])
    expect(same(seen[0]?.weights ?? [], before)).toBe(false)
  }, 60_000)

  it("takes a skipped step when the buffer drops every group as zero-variance, and does not wedge", async () => {
    const subjects = subjectsFor("learnerzv")
    const job = "job-zv"
    const initial = TinyMoe.create({ config, seed: 4 })
    const reports: StepReport[] = []
    const result = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          yield* ensureSamplerStreams(bus, subjects)
          yield* Effect.forkScoped(runBuffer({ subjects, jobId: job, groupSize: 2 }))
          // Every episode scores 0: every group of two has zero variance.
          yield* publishEpisodes(bus, subjects, job, initial, 0, 8, 0n, {
            groupSize: 2,
            reward: () => 0,
          })
          const learner = (maxSteps: number) =>
            runLearner({
              subjects,
              jobId: job,
              config: { ...DEFAULT_LEARNER_CONFIG, criticWarmupSteps: 0, advantageMode: "group" },
              initial,
              batchSize: 4,
              maxStaleness: 4,
              maxSteps,
              wholeGroups: true,
              groupSize: 2,
              batchWaitMs: 300,
              onStep: (r) => Effect.sync(() => void reports.push(r)),
            })
          // Nothing to learn from: one skipped step (a new version, so a coordinator would
          // admit new episodes in place of the dropped ones).
          yield* learner(1)
          // New episodes with a signal (rewards 0 and 1 in each group): the learner goes on.
          yield* publishEpisodes(bus, subjects, job, initial, 100, 4, 1n, {
            groupSize: 2,
            reward: (_, e) => e % 2,
          })
          return yield* learner(2)
        }),
      ).pipe(Effect.provide(layers)),
    )
    expect(result).toEqual({ steps: 2, version: 2n })
    expect(reports[0]).toMatchObject({
      skipped: true,
      skipReason: "all_groups_filtered",
      episodeIds: [],
      bufferDroppedZeroVariance: 8,
    })
    expect(reports[1]).toMatchObject({ skipped: false, sequences: 4 })
    expect(reports[1]?.episodeIds).toHaveLength(4)
  }, 60_000)

  it("sizes each update by nextBatchSize when given, asked once per update", async () => {
    const subjects = subjectsFor("learnersize")
    const job = "job-size"
    const initial = TinyMoe.create({ config, seed: 4 })
    const reports: StepReport[] = []
    const sizes = [3, 6, 2]
    let asked = 0
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          yield* ensureSamplerStreams(bus, subjects)
          yield* Effect.forkScoped(runBuffer({ subjects, jobId: job }))
          yield* publishEpisodes(bus, subjects, job, initial, 0, 11, 0n)
          return yield* runLearner({
            subjects,
            jobId: job,
            config: { ...DEFAULT_LEARNER_CONFIG, criticWarmupSteps: 0 },
            initial,
            batchSize: 4,
            nextBatchSize: Effect.sync(() => sizes[asked++] ?? 0),
            maxStaleness: 4,
            maxSteps: 3,
            batchWaitMs: 5_000,
            onStep: (r) => Effect.sync(() => void reports.push(r)),
          })
        }),
      ).pipe(Effect.provide(layers)),
    )
    expect(reports.map((r) => r.sequences)).toEqual([3, 6, 2])
    expect(asked).toBe(3)
  }, 60_000)

  it("ends before maxSteps when nextBatchSize answers 0, and checkpoints and announces the last update", async () => {
    const subjects = subjectsFor("learnerstop")
    const job = "job-stop"
    const initial = TinyMoe.create({ config, seed: 4 })
    const sizes = [4, 4]
    let asked = 0
    const announced: bigint[] = []
    const out = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          yield* ensureSamplerStreams(bus, subjects)
          yield* Effect.forkScoped(runBuffer({ subjects, jobId: job }))
          yield* followWeights(bus, subjects, job, {
            version: -1n,
            setWeights: (_: TinyMoe, v: bigint) => void announced.push(v),
          })
          yield* publishEpisodes(bus, subjects, job, initial, 0, 12, 0n)
          const result = yield* runLearner({
            subjects,
            jobId: job,
            // Announced every 5th update and checkpointed every 10th: neither falls on update 2.
            config: { ...DEFAULT_LEARNER_CONFIG, criticWarmupSteps: 0, publishEverySteps: 5 },
            initial,
            batchSize: 4,
            nextBatchSize: Effect.sync(() => sizes[asked++] ?? 0),
            maxStaleness: 4,
            maxSteps: 10,
            checkpointEvery: 10,
            batchWaitMs: 5_000,
          })
          yield* Effect.sleep("200 millis")
          const ckpt = yield* loadCheckpoint(bus, `${subjects.prefix}-checkpoints`, job, {
            ...DEFAULT_LEARNER_CONFIG,
            criticWarmupSteps: 0,
          })
          return { result, checkpointStep: ckpt?.trainer.step, checkpointVersion: ckpt?.version }
        }),
      ).pipe(Effect.provide(layers)),
    )
    expect(out.result).toEqual({ steps: 2, version: 2n })
    expect(asked).toBe(3)
    expect(out.checkpointStep).toBe(2)
    expect(out.checkpointVersion).toBe(2n)
    // v0 at the start, then the last update's on the early end (its turn of 5 never came).
    expect(announced).toEqual([0n, 2n])
  }, 60_000)

  it("multiplies the policy loss of stale trajectories by the buffer's weight", async () => {
    const subjects = subjectsFor("learnerstale")
    const job = "job-stale"
    const initial = TinyMoe.create({ config, seed: 4 })
    const reports: StepReport[] = []
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          yield* ensureSamplerStreams(bus, subjects)
          yield* Effect.forkScoped(runBuffer({ subjects, jobId: job, stalePolicy: "downweight" }))
          yield* publishEpisodes(bus, subjects, job, initial, 0, 8, 0n)
          // η = 0: the second batch (learner at v1) is one version too stale → weight 0.5.
          return yield* runLearner({
            subjects,
            jobId: job,
            config: { ...DEFAULT_LEARNER_CONFIG, criticWarmupSteps: 0 },
            initial,
            batchSize: 4,
            maxStaleness: 0,
            maxSteps: 2,
            onStep: (r) => Effect.sync(() => void reports.push(r)),
          })
        }),
      ).pipe(Effect.provide(layers)),
    )
    expect(reports.map((r) => r.weightMean)).toEqual([1, 0.5])
    expect(reports[1]?.stalenessMean).toBe(1)
  }, 60_000)

  it("restores a checkpoint whose actor optimiser still holds the value head", async () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const restored = await Effect.runPromise(
      Effect.gen(function* () {
        const bus = yield* Bus
        // The format before the critic had an optimiser of its own: one AdamW over everything.
        const old = new Trainer(model, DEFAULT_LEARNER_CONFIG, optimizerFor(model, { lr: 1e-3 }))
        old.step = 3
        yield* saveCheckpoint(bus, "ckpt", "job-old", old, 3n, "b")
        return yield* loadCheckpoint(bus, "ckpt", "job-old", DEFAULT_LEARNER_CONFIG)
      }).pipe(Effect.provide(layers)),
    )
    expect(restored?.trainer.step).toBe(3)
    const names = [...(restored?.trainer.optimizer.state().tensors.keys() ?? [])]
    expect(names).not.toContain("m.valueHead")
    expect(names).toContain("m.layers.0.wq")
  })

  it("continues the given actor optimiser (a warm start's moments and step count) instead of a fresh one", async () => {
    const warm = new Trainer(TinyMoe.create({ config, seed: 4 }), DEFAULT_LEARNER_CONFIG)
    for (let i = 0; i < 3; i++) warm.sftStep([GOLD])
    const run = (job: string, continued: boolean) =>
      Effect.scoped(
        Effect.gen(function* () {
          const subjects = subjectsFor(`learneropt${job}`)
          const bus = yield* Bus
          yield* ensureSamplerStreams(bus, subjects)
          yield* Effect.forkScoped(runBuffer({ subjects, jobId: job }))
          yield* publishEpisodes(bus, subjects, job, warm.model, 0, 8, 0n)
          let optimizerSteps = 0
          const cfg = { ...DEFAULT_LEARNER_CONFIG, criticWarmupSteps: 0 }
          yield* runLearner({
            subjects,
            jobId: job,
            config: cfg,
            initial: TinyMoe.fromParams(
              warm.model.config,
              mapParams(warm.model.config, warm.model.params, warm.model.precision, (d) => d),
              warm.model.precision,
            ),
            ...(continued ? { initialOptimizer: warm.optimizer.state() } : {}),
            batchSize: 8,
            maxStaleness: 4,
            maxSteps: 1,
            checkpointEvery: 1,
            onStep: (r) =>
              Effect.sync(() => {
                optimizerSteps = r.optimizerSteps
              }),
          })
          const ckpt = yield* loadCheckpoint(bus, `${subjects.prefix}-checkpoints`, job, cfg)
          return { optimizerSteps, state: ckpt?.trainer.optimizer.state() }
        }),
      ).pipe(Effect.provide(layers))
    const fresh = await Effect.runPromise(run("fresh", false))
    const continued = await Effect.runPromise(run("continued", true))
    expect(fresh.optimizerSteps).toBeGreaterThan(0)
    expect(fresh.state?.step).toBe(fresh.optimizerSteps)
    // The warm start's 3 steps, then the update's.
    expect(continued.state?.step).toBe(3 + continued.optimizerSteps)
  }, 60_000)
})
