import { Effect, Fiber, Queue } from "effect"
import { runBuffer } from "../../actors/buffer/index.ts"
import { runLearner, type StepReport } from "../../actors/learner/actor.ts"
import { EMBEDDED_RL_CONFIG } from "../../actors/learner/embedded.ts"
import { sftWarmStart } from "../../actors/learner/sft.ts"
import { followWeights } from "../../actors/learner/weights.ts"
import { startSandboxAndVerifier } from "../../actors/local.ts"
import { shellBlock } from "../../actors/sampler/actions/index.ts"
import { runSampler } from "../../actors/sampler/actor.ts"
import { runEpisodeBatch } from "../../actors/sampler/batch.ts"
import { embeddedPolicy } from "../../actors/sampler/policy/embedded.ts"
import { ensureSamplerStreams } from "../../actors/sampler/streams.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate, mapParams, TinyMoe } from "../../model/index.ts"
import { selectKernels } from "../../model/kernels/select.ts"
import { EpisodePurpose, type Task as TaskMessage, type Trajectory } from "../../proto/index.ts"
import { Bus, type BusShape, type Subjects } from "../../services/bus/index.ts"
import type { Metrics } from "../../services/metrics/index.ts"
import { loadTasks, type Task } from "../../tasks/index.ts"
import { resolvedWireTask } from "../../tasks/wire.ts"
import { progressBar } from "./progress.ts"
import {
  type EvalSummary,
  type RoundSummary,
  summaryTable,
  type UpReport,
  writeReport,
} from "./report.ts"

export interface UpOptions {
  readonly trainDir: string
  readonly evalDir: string
  readonly out: string
  readonly sftSteps: number
  readonly rounds: number
  readonly tasksPerRound: number
  readonly samplesPerTask: number
  readonly evalSamples: number
  readonly turns: number
  readonly seed: number
  readonly concurrency: number
}

const JOB = "up"

interface Prepared {
  readonly task: Task
  readonly wire: TaskMessage
}

/** Runs `samples` episodes of each task through the samplers and reads their trajectories back. */
const runEpisodes = (
  bus: BusShape,
  subjects: Subjects,
  job: string,
  tasks: ReadonlyArray<Prepared>,
  samples: number,
  purpose: EpisodePurpose,
  version: bigint,
  o: UpOptions,
  label: string,
): Effect.Effect<Trajectory[], unknown> =>
  Effect.gen(function* () {
    const n = tasks.length * samples
    const bar = progressBar(label, n)
    let done = 0
    const trajectories = yield* runEpisodeBatch(
      bus,
      subjects,
      {
        job,
        groups: tasks.map(({ wire }) => ({ task: wire, samples })),
        purpose,
        policyVersion: version,
        sampling: { temperature: 1, topP: 1, maxTokens: 64 },
        limits: {
          maxTurns: o.turns,
          maxTokens: 2048,
          commandTimeoutMs: 10_000,
          observationMaxTokens: 192,
        },
        seedBase: o.seed * 100_000,
      },
      () => {
        done++
        bar.update(done)
      },
    )
    const resolved = trajectories.filter((t) => t.end?.resolved).length
    bar.done(`resolved ${resolved}/${n}`)
    return trajectories
  })

const evalSummary = (ts: ReadonlyArray<Trajectory>): EvalSummary => {
  const ok = ts.filter((t) => !t.end?.infraFailed && !t.end?.unverifiable)
  return {
    episodes: ok.length,
    resolvedRate: ok.length ? ok.filter((t) => t.end?.resolved).length / ok.length : 0,
    rewardMean: ok.length ? ok.reduce((a, t) => a + (t.end?.reward ?? 0), 0) / ok.length : 0,
    testsPassed: ok.reduce((a, t) => a + (t.end?.testsPassed ?? 0), 0),
    testsTotal: ok.reduce((a, t) => a + (t.end?.testsTotal ?? 0), 0),
  }
}

const prepare = (dir: string) =>
  Effect.gen(function* () {
    const tasks = yield* loadTasks([dir])
    return yield* Effect.forEach(tasks, (task) =>
      Effect.map(resolvedWireTask(task), (wire) => ({ task, wire })),
    )
  })

/**
 * `t1 up`: the whole system in one process on the embedded default — sandbox host and verifier,
 * samplers with the embedded TinyMoE, buffer and learner — running the recipe end to end: SFT
 * warm start on golden trajectories, evaluation on the held-out tasks, RL rounds (admit a round
 * of episodes, the buffer serves them, the learner updates and publishes weights the samplers
 * switch to between turns), evaluation again, and a report.
 */
export const runUp = (
  o: UpOptions,
  subjects: Subjects,
  driver: string,
): Effect.Effect<UpReport, unknown, Bus | Metrics> =>
  Effect.scoped(
    Effect.gen(function* () {
      const started = Date.now()
      const bus = yield* Bus
      const tokenizer = loadBundledTokenizer()
      const template = new ChatTemplate(tokenizer)
      yield* ensureSamplerStreams(bus, subjects)
      yield* startSandboxAndVerifier(subjects, { concurrency: o.concurrency })
      const train = yield* prepare(o.trainDir)
      const evaluation = yield* prepare(o.evalDir)

      // 1. Warm start.
      const sftBar = progressBar("SFT warm start", o.sftSteps)
      const sft = yield* sftWarmStart(
        bus,
        subjects,
        train.map((p) => p.task),
        template,
        shellBlock,
        {
          steps: o.sftSteps,
          batch: 2,
          lr: 3e-3,
          seed: o.seed,
          maxTokens: 1536,
          onStep: (step, loss) => sftBar.update(step, `loss ${loss.toFixed(2)}`),
        },
      )
      sftBar.done(`loss ${sft.losses[0]?.toFixed(2)} → ${sft.losses.at(-1)?.toFixed(2)}`)

      // 2. Samplers on the SFT weights (version 0), following the learner's announcements.
      const policy = yield* embeddedPolicy(sft.model.withKernels(selectKernels("auto")), 0n, {
        contextLength: 2048,
      })
      yield* followWeights(bus, subjects, JOB, policy, selectKernels("auto"))
      yield* Effect.forkScoped(
        runSampler({ subjects, policy, template, format: shellBlock, concurrency: o.concurrency }),
      )

      // 3. Evaluation before RL.
      const before = evalSummary(
        yield* runEpisodes(
          bus,
          subjects,
          "up-eval-before",
          evaluation,
          o.evalSamples,
          EpisodePurpose.EVAL,
          0n,
          o,
          "eval before RL",
        ),
      )

      // 4. RL rounds: the buffer and the learner run as actors; each round admits one batch.
      yield* Effect.forkScoped(runBuffer({ subjects, jobId: JOB, groupSize: o.samplesPerTask }))
      const steps = yield* Queue.unbounded<StepReport>()
      const learner = yield* Effect.forkScoped(
        runLearner({
          subjects,
          jobId: JOB,
          config: { ...EMBEDDED_RL_CONFIG, lr: 1e-3, criticLr: 1e-3 },
          // The learner trains its own copy; the samplers keep theirs until an announcement.
          initial: TinyMoe.fromParams(
            sft.model.config,
            mapParams(sft.model.config, sft.model.params, "f32", (d) => d),
            "f32",
          ),
          batchWaitMs: 30 * 60_000,
          batchSize: o.tasksPerRound * o.samplesPerTask,
          maxStaleness: 1,
          maxSteps: o.rounds,
          checkpointEvery: o.rounds,
          onStep: (report) => Queue.offer(steps, report).pipe(Effect.asVoid),
        }),
      )
      const rounds: RoundSummary[] = []
      for (let round = 0; round < o.rounds; round++) {
        const picked = Array.from(
          { length: Math.min(o.tasksPerRound, train.length) },
          (_, i) => train[(round * o.tasksPerRound + i) % train.length] as Prepared,
        )
        const roundStarted = Date.now()
        yield* runEpisodes(
          bus,
          subjects,
          JOB,
          picked.map((p) => ({ ...p, wire: { ...p.wire, id: `${p.wire.id}-r${round}` } })),
          o.samplesPerTask,
          EpisodePurpose.TRAIN,
          BigInt(round),
          o,
          `RL round ${round + 1}/${o.rounds}`,
        )
        const report = yield* Queue.take(steps)
        rounds.push({
          round: round + 1,
          version: Number(report.version),
          rewardMean: report.rewardMean,
          resolvedRate: report.resolvedRate,
          trainInferDiff: report.trainInferLogprobAbsDiff,
          mismatchK3: report.mismatchKlK3,
          policyLoss: report.policyLoss,
          valueLoss: report.valueLoss,
          explainedVariance: report.explainedVariance,
          seconds: (Date.now() - roundStarted) / 1000,
        })
      }
      const final = yield* Fiber.join(learner)
      // The samplers switch on the announcement; wait until they run the last version.
      while (policy.version < final.version) yield* Effect.sleep("100 millis")

      // 5. Evaluation after RL.
      const after = evalSummary(
        yield* runEpisodes(
          bus,
          subjects,
          "up-eval-after",
          evaluation,
          o.evalSamples,
          EpisodePurpose.EVAL,
          final.version,
          o,
          "eval after RL",
        ),
      )
      const report: UpReport = {
        before,
        after,
        rounds,
        sftLosses: sft.losses,
        golden: sft.golden,
        seconds: (Date.now() - started) / 1000,
        driver,
      }
      return report
    }),
  )

export { summaryTable, writeReport }
