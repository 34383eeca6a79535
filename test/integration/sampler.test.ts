import { readFile } from "node:fs/promises"
import { join } from "node:path"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Effect, Layer, type Scope, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { TrajectoryAssembler, TrajectoryCorrupt } from "../../actors/buffer/assemble.ts"
import { startSandboxAndVerifier } from "../../actors/local.ts"
import { shellBlock } from "../../actors/sampler/actions/index.ts"
import { runSampler } from "../../actors/sampler/actor.ts"
import { busPortsLayer } from "../../actors/sampler/bus-ports.ts"
import { runEpisode } from "../../actors/sampler/episode.ts"
import {
  type GenerateResult,
  PolicyBackend,
  type PolicyBackendShape,
} from "../../actors/sampler/policy/backend.ts"
import { embeddedPolicy } from "../../actors/sampler/policy/embedded.ts"
import { scriptedPolicy } from "../../actors/sampler/policy/scripted.ts"
import { dockerEngineAvailable } from "../../actors/sandbox/docker/index.ts"
import { resolveTaskImage } from "../../actors/sandbox/image/index.ts"
import {
  CHAT_SPECIAL_TOKENS,
  ChatTemplate,
  type Routing,
  TinyMoe,
  type Tokenizer,
  tokenLogprobs,
  trainTokenizer,
} from "../../model/index.ts"
import {
  EpisodePurpose,
  EpisodeWorkItemSchema,
  type Task as TaskMessage,
  TerminationReason,
  TrajectoryRecordSchema,
} from "../../proto/index.ts"
import {
  Bus,
  type BusShape,
  NatsBusLive,
  type Subjects,
  subjectsFor,
} from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import { Metrics, makeMetrics } from "../../services/metrics/index.ts"
import { loadTask } from "../../tasks/index.ts"
import { taskToWire } from "../../tasks/wire.ts"
import { useNatsServer } from "../support/nats-url.ts"

const docker = await Effect.runPromise(dockerEngineAvailable())
const nats = useNatsServer()

const TASK_DIR = join(import.meta.dirname, "../../tasks/bundled/train/archive-backup-easy-s0-000")

/** A small tokenizer learned from the bundled tasks' text, with the completion token. */
const bundledTokenizer = async (): Promise<Tokenizer> => {
  const texts = [
    await readFile(join(TASK_DIR, "instruction.md"), "utf8"),
    await readFile(join(TASK_DIR, "solution/solve.sh"), "utf8"),
  ]
  return trainTokenizer([...texts, ...texts, "```bash\nls -la\n```\n<|done|>"], {
    vocabSize: 400,
    specialTokens: [...CHAT_SPECIAL_TOKENS, "<|done|>"],
  })
}

const wireTask = Effect.gen(function* () {
  const task = yield* loadTask(TASK_DIR)
  const { image } = yield* resolveTaskImage(task)
  return { task, wire: yield* taskToWire(task, image) }
})

const workItem = (
  job: string,
  episode: string,
  task: TaskMessage,
  limits: Partial<{ maxTurns: number; maxTokens: number }>,
  turnMaxTokens = 40,
) =>
  create(EpisodeWorkItemSchema, {
    jobId: job,
    episodeId: episode,
    attempt: 0,
    taskRef: { taskSet: task.taskSet, taskId: task.id },
    task,
    sampling: { temperature: 1, topP: 1, maxTokens: turnMaxTokens, seed: 7n },
    limits: {
      wallClockSec: 300,
      commandTimeoutMs: 10_000,
      observationMaxBytes: 2048,
      observationMaxTokens: 256,
      ...limits,
    },
    purpose: EpisodePurpose.TRAIN,
    groupId: `${episode}-group`,
    groupSize: 1,
    admittedUnixMs: BigInt(Date.now()),
  })

const system = <A, E>(
  f: (bus: BusShape, subjects: Subjects) => Effect.Effect<A, E, Scope.Scope | Bus | Metrics>,
) => {
  const subjects = subjectsFor(`st${Math.random().toString(36).slice(2, 8)}`)
  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const bus = yield* Bus
        yield* ensureSamplerStreams(bus, subjects)
        yield* startSandboxAndVerifier(subjects)
        return yield* f(bus, subjects)
      }),
    ).pipe(
      Effect.provide(
        Layer.mergeAll(
          NatsBusLive({ servers: nats.url, name: "t1-sampler-test" }),
          Layer.succeed(Metrics, makeMetrics({ defaultMetrics: false })),
        ),
      ),
    ),
  )
}

/** Reads the job's trajectory stream as the buffer does, until one trajectory is complete. */
const readTrajectory = (bus: BusShape, subjects: Subjects, job: string) =>
  Effect.gen(function* () {
    const durable = `test-${job}`
    yield* bus.ensureConsumer({
      stream: subjects.trajectoriesStream,
      durable,
      filterSubject: subjects.trajectories(job),
      ackWaitMs: 30_000,
      maxDeliver: 5,
    })
    const assembler = new TrajectoryAssembler()
    const seqs: number[] = []
    const found = yield* bus
      .consume(subjects.trajectoriesStream, durable, { maxInFlight: 64 })
      .pipe(
        Stream.mapEffect((item) =>
          Effect.gen(function* () {
            const record = fromBinary(TrajectoryRecordSchema, item.data)
            if (record.record.case === "chunk") seqs.push(record.record.value.seq)
            yield* item.ack
            return assembler.add(record, Date.now())
          }),
        ),
        Stream.filter((r) => r !== undefined),
        Stream.runHead,
      )
    const trajectory = found._tag === "Some" ? found.value : undefined
    if (!trajectory || trajectory instanceof TrajectoryCorrupt)
      throw new Error(`no trajectory: ${String(trajectory)}`)
    return { trajectory: trajectory.toTrajectory(), seqs }
  })

const u32 = (b: Uint8Array) =>
  new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))
const f32 = (b: Uint8Array) =>
  new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))

/** Records every turn the policy returns, to compare with what the trajectory holds. */
const recording = (policy: PolicyBackendShape) => {
  const turns: GenerateResult[] = []
  const wrapped: PolicyBackendShape = {
    ...policy,
    generate: (request) =>
      policy.generate(request).pipe(Effect.tap((r) => Effect.sync(() => turns.push(r)))),
  }
  return { policy: wrapped, turns }
}

describe.skipIf(!docker)("sampler on NATS and Docker", () => {
  it("runs an episode from the work queue with the embedded TinyMoE; the buffer side reassembles exactly what was sampled", async () => {
    const tokenizer = await bundledTokenizer()
    const model = TinyMoe.create({
      config: {
        vocabSize: tokenizer.vocabSize,
        dModel: 32,
        nLayers: 2,
        nHeads: 2,
        nExperts: 4,
        topK: 2,
        dFf: 48,
        maxSeqLen: 2048,
      },
      seed: 3,
    })
    const { trajectory, seqs, turns } = await system((bus, subjects) =>
      Effect.gen(function* () {
        const { wire } = yield* wireTask
        const embedded = yield* embeddedPolicy(model, 5n, { contextLength: 2048 })
        const { policy, turns } = recording(embedded)
        yield* Effect.forkScoped(
          runSampler({
            subjects,
            policy,
            template: new ChatTemplate(tokenizer),
            format: shellBlock,
            concurrency: 2,
          }),
        )
        const item = workItem("job-a", "ep-1", wire, { maxTurns: 3, maxTokens: 1500 })
        yield* bus.jsPublish(subjects.episodes, toBinary(EpisodeWorkItemSchema, item), {
          msgId: "ep-1:0",
        })
        const read = yield* readTrajectory(bus, subjects, "job-a")
        return { ...read, turns }
      }),
    )
    const end = trajectory.end
    expect(end?.infraFailed).toBe(false)
    expect([
      TerminationReason.MAX_TURNS,
      TerminationReason.COMPLETED,
      TerminationReason.AGENT_ERROR,
    ]).toContain(end?.termination)
    const ids = u32(trajectory.tokenIds)
    const logprobs = f32(trajectory.logprobs)
    const mask = trajectory.lossMask
    const n = ids.length
    expect(n).toBe(end?.totalTokens)
    expect(logprobs.length).toBe(n)
    expect(mask.length).toBe(n)
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
    // TITO: the loss region is exactly the sampled ids, with the sampler's log-probs.
    const sampled = turns.flatMap((t) => [...t.tokens])
    const sampledLogprobs = turns.flatMap((t) => [...t.logprobs])
    const lossIds: number[] = []
    const lossLogprobs: number[] = []
    for (let i = 0; i < n; i++) {
      if (mask[i] === 1) {
        lossIds.push(ids[i] as number)
        lossLogprobs.push(logprobs[i] as number)
      } else expect(logprobs[i]).toBe(0)
    }
    expect(lossIds).toEqual(sampled)
    expect(lossLogprobs).toEqual(sampledLogprobs.map((x) => Math.fround(x)))
    expect(end?.generatedTokens).toBe(sampled.length)
    expect(end?.policyVersionStart).toBe(5n)
    // Routing: one row per position the model processed (all but the last token), and the
    // same expert choices and log-probs when the learner re-scores the trajectory.
    // Rows cover every position up to the last generated token (never fed back: the episode
    // ended); the observation appended after it was never processed either.
    const [rows = 0, layers, topK] = trajectory.routingShape
    expect([layers, topK]).toEqual([2, 2])
    expect(rows).toBe(mask.lastIndexOf(1))
    const routing = new Uint8Array(trajectory.routing) as Routing
    const scored = model.score(ids.subarray(0, rows), { replay: routing, tape: false })
    const recomputed = model.score(ids.subarray(0, rows), { tape: false })
    expect(Buffer.from(recomputed.routing).equals(Buffer.from(routing))).toBe(true)
    const learner = tokenLogprobs(scored.logits, ids.subarray(1, rows + 1), model.config.vocabSize)
    let checked = 0
    for (let i = 1; i <= rows; i++) {
      if (mask[i] !== 1) continue
      expect(Math.abs((learner[i - 1] as number) - (logprobs[i] as number))).toBeLessThan(1e-4)
      checked++
    }
    expect(checked).toBe(sampled.length)
    expect(trajectory.turnStarts[0]).toBe(0)
    expect(trajectory.turnStarts.length).toBe(end?.turns)
  }, 120_000)

  it("the oracle agent (the reference solution as actions) resolves the task through sandbox and verifier", async () => {
    const tokenizer = await bundledTokenizer()
    const end = await system((_bus, subjects) =>
      Effect.gen(function* () {
        const { task, wire } = yield* wireTask
        const script = yield* Effect.promise(() => readFile(task.solution as string, "utf8"))
        const turns = shellBlock.renderSolution(script)
        const policy = scriptedPolicy(tokenizer, () => turns)
        const item = workItem("job-o", "oracle-1", wire, { maxTurns: 40, maxTokens: 100_000 }, 4000)
        const ports = busPortsLayer(
          subjects,
          { jobId: "job-o", episodeId: "oracle-1", attempt: 0 },
          { template: new ChatTemplate(tokenizer), format: shellBlock },
        )
        return yield* runEpisode(item, 0).pipe(
          Effect.provide(ports),
          Effect.provideService(PolicyBackend, policy),
        )
      }),
    )
    expect(end.infraFailed).toBe(false)
    expect(end.termination).toBe(TerminationReason.COMPLETED)
    expect(end.resolved).toBe(true)
    expect(end.testsPassed).toBe(end.testsTotal)
    expect(end.reward).toBe(end.testsTotal)
    expect(end.testsTotal).toBeGreaterThan(0)
  }, 120_000)

  it("a 300-turn episode (scripted) completes with bounded memory, every chunk delivered in order", async () => {
    const tokenizer = await bundledTokenizer()
    const TURNS = 300
    const script = [
      ...Array.from(
        { length: TURNS },
        (_, i) => `\`\`\`bash\necho step ${i} && printf 'x%.0s' $(seq 1 200)\n\`\`\``,
      ),
      "<|done|>",
    ]
    let peakRss = 0
    const sampleRss = () => {
      peakRss = Math.max(peakRss, process.memoryUsage().rss)
    }
    const startRss = process.memoryUsage().rss
    const { end, trajectory, seqs } = await system((bus, subjects) =>
      Effect.gen(function* () {
        const { wire } = yield* wireTask
        const policy = scriptedPolicy(tokenizer, () => script)
        const item = workItem(
          "job-l",
          "long-1",
          wire,
          { maxTurns: TURNS + 10, maxTokens: 2_000_000 },
          1000,
        )
        const ports = busPortsLayer(
          subjects,
          { jobId: "job-l", episodeId: "long-1", attempt: 0 },
          {
            template: new ChatTemplate(tokenizer),
            format: shellBlock,
            onTurn: () => Effect.sync(sampleRss),
          },
        )
        const end = yield* runEpisode(item, 0).pipe(
          Effect.provide(ports),
          Effect.provideService(PolicyBackend, policy),
        )
        const read = yield* readTrajectory(bus, subjects, "job-l")
        return { end, ...read }
      }),
    )
    console.log(
      `300-turn episode: ${end.turns} turns, ${end.totalTokens} tokens, ${end.totalChunks} chunks, ${end.timings?.totalMs} ms; RSS ${(startRss / 2 ** 20).toFixed(0)} → peak ${(peakRss / 2 ** 20).toFixed(0)} MiB`,
    )
    expect(end.error?.message ?? "").toBe("")
    expect(end.termination).toBe(TerminationReason.COMPLETED)
    expect(end.turns).toBe(TURNS + 1)
    expect(end.totalChunks).toBeGreaterThanOrEqual(TURNS)
    expect(seqs).toEqual(Array.from({ length: end.totalChunks }, (_, i) => i))
    expect(u32(trajectory.tokenIds).length).toBe(end.totalTokens)
    expect(peakRss - startRss).toBeLessThan(256 * 2 ** 20)
  }, 300_000)
})
