/**
 * `t1 up`: the whole system in this process on the embedded default, and the T1 recipe on the
 * task ladder run as jobs through it — the path every submitted job takes:
 *
 *   1. a JOB_KIND_SFT job: the warm start on a few demonstrations (reference solutions played
 *      through the sandboxes and the verifier), from TinyMoE initialised from the seed;
 *   2. JOB_KIND_EVAL jobs on the held-out tasks (unseen names, and families never trained on)
 *      with the warm start's weights (policy_ref job:<sft>);
 *   3. a JOB_KIND_TRAIN job from those weights on the other train tasks: group-relative PPO,
 *      one batch of whole groups per update;
 *   4. the evaluations again on the train job's last weights.
 *
 * Progress and the report come from the jobs' events (WatchJob), as any client would see them.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { EMBEDDED_MODEL_CONFIG } from "../../actors/learner/index.ts"
import {
  type LadderRecipeOptions,
  recipeLimits,
  recipeTaskSets,
} from "../../actors/recipe/index.ts"
import { baseImageDriver } from "../../actors/sandbox/index.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { encodeWeights, TinyMoe } from "../../model/index.ts"
import {
  AdvantageMode,
  type EpisodeFinished,
  type JobEvent,
  JobKind,
  TrainPhase,
  type TrainStepReport,
} from "../../proto/index.ts"
import { Bus, subjectsFor } from "../../services/bus/index.ts"
import { jobServiceClientScoped } from "../../services/gateway/index.ts"
import type { Metrics } from "../../services/metrics/index.ts"
import type { Task } from "../../tasks/index.ts"
import { followJob } from "./follow.ts"
import { progressBar } from "./progress.ts"
import {
  type EvalSummary,
  type RoundSummary,
  summaryTable,
  type UpReport,
  writeReport,
} from "./report.ts"
import { startUpSystem } from "./system.ts"

/** The recipe's settings `t1 up` honours (its waves and control arms are exp:learn's). */
export interface UpOptions
  extends Pick<
    LadderRecipeOptions,
    | "seed"
    | "demos"
    | "trainPerFamily"
    | "evalPerFamily"
    | "rungs"
    | "demoPool"
    | "taskDirs"
    | "sftSteps"
    | "sftBatch"
    | "sftLr"
    | "rlSteps"
    | "tasksPerStep"
    | "samples"
    | "evalSamples"
    | "evalTemperature"
    | "rlTemperature"
    | "lr"
    | "turns"
    | "concurrency"
    | "driver"
  > {
  readonly out: string
}

/** Generated tokens per turn (the recipe's short turns). */
const TURN_TOKENS = 64

/** The recipe's episodes need no more context than this. */
const CONTEXT_LENGTH = 1024

/** Scored episodes of one evaluation, by rung, as the report shows them. */
const summaryOf = (
  finished: ReadonlyArray<EpisodeFinished>,
  rungOf: (taskId: string) => number,
): EvalSummary => {
  const scored = finished.filter((f) => !f.infraFailed && !f.unverifiable)
  const rungs: Record<string, { episodes: number; resolved: number }> = {}
  let reward = 0
  for (const f of scored) {
    const rung = String(rungOf(f.taskId.split("/").at(-1) ?? f.taskId))
    const r = rungs[rung] ?? { episodes: 0, resolved: 0 }
    rungs[rung] = r
    r.episodes++
    if (f.resolved) r.resolved++
    reward += f.testsTotal > 0 ? f.testsPassed / f.testsTotal : 0
  }
  const resolved = scored.filter((f) => f.resolved).length
  return {
    episodes: scored.length,
    resolvedRate: scored.length === 0 ? 0 : resolved / scored.length,
    rewardMean: scored.length === 0 ? 0 : reward / scored.length,
    testsPassed: scored.reduce((a, f) => a + f.testsPassed, 0),
    testsTotal: scored.reduce((a, f) => a + f.testsTotal, 0),
    rungs,
  }
}

const finishedOf = (e: JobEvent): EpisodeFinished | undefined =>
  e.event.case === "episodeFinished" ? e.event.value : undefined

const stepOf = (e: JobEvent): TrainStepReport | undefined =>
  e.event.case === "learnerStep" ? e.event.value : undefined

export const runUp = (o: UpOptions): Effect.Effect<UpReport, unknown, Bus | Metrics> =>
  Effect.scoped(
    Effect.gen(function* () {
      const started = Date.now()
      const bus = yield* Bus
      const subjects = subjectsFor(`up${o.seed}x${Date.now().toString(36)}`)
      const dir = mkdtempSync(join(tmpdir(), `t1-up-${o.seed}-`))
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => rmSync(dir, { recursive: true, force: true })),
      )
      const sets = yield* recipeTaskSets(o, dir)
      const tokenizer = loadBundledTokenizer()
      const endpoint = yield* startUpSystem(subjects, {
        concurrency: o.concurrency,
        driver: o.driver,
        contextLength: CONTEXT_LENGTH,
        tokenizer,
      })
      // The report names what ran: `auto` resolved as the sandbox host resolved it.
      const drivenBy = yield* baseImageDriver(o.driver)
      const client = yield* jobServiceClientScoped(endpoint.address)

      // The starting weights (the recipe's wider TinyMoE, from the seed), as a named object.
      const init = `t1-up-init-s${o.seed}`
      const model = TinyMoe.create({
        config: { ...EMBEDDED_MODEL_CONFIG, vocabSize: tokenizer.vocabSize },
        seed: o.seed,
      })
      yield* (yield* bus.objectStore(subjects.weightsBucket)).put(init, encodeWeights(model))

      const ids = (tasks: ReadonlyArray<Task>) => tasks.map((t) => t.id)
      const common = (temperature: number) => ({
        sampling: { temperature, topP: 1, maxTokens: TURN_TOKENS, seed: BigInt(o.seed) },
        limits: recipeLimits(o.turns),
        maxConcurrentEpisodes: o.concurrency,
        seed: BigInt(o.seed + 1),
        labels: { "t1-up": `seed-${o.seed}` },
      })

      // 1. The warm start.
      const sftBar = progressBar(`SFT warm start (${sets.demos.length} demonstrations)`, o.sftSteps)
      const sftLosses: number[] = []
      let golden = 0
      const sft = yield* followJob(
        client,
        {
          spec: {
            ...common(1),
            name: "t1 up: SFT warm start",
            kind: JobKind.SFT,
            taskSet: sets.dirs.train,
            taskIds: ids(sets.demos),
            policyRef: init,
            learner: { sftSteps: o.sftSteps, sftLr: o.sftLr, batchTrajectories: o.sftBatch },
          },
        },
        (e) => {
          const s = stepOf(e)
          if (s?.phase !== TrainPhase.SFT) return
          sftLosses.push(s.policyLoss)
          golden = s.metrics.golden_trajectories ?? golden
          sftBar.update(Number(s.step), `loss ${s.policyLoss.toFixed(2)}`)
        },
      )
      sftBar.done(`loss ${sftLosses[0]?.toFixed(2)} → ${sftLosses.at(-1)?.toFixed(2)}`)

      const evaluate = (
        label: string,
        policyRef: string,
        taskSet: string,
        tasks: ReadonlyArray<Task>,
      ) =>
        Effect.gen(function* () {
          const bar = progressBar(label, tasks.length * o.evalSamples)
          const finished: EpisodeFinished[] = []
          yield* followJob(
            client,
            {
              spec: {
                ...common(o.evalTemperature),
                name: `t1 up: ${label}`,
                kind: JobKind.EVAL,
                taskSet,
                taskIds: ids(tasks),
                policyRef,
                samplesPerTask: o.evalSamples,
              },
            },
            (e) => {
              const f = finishedOf(e)
              if (f === undefined) return
              finished.push(f)
              bar.update(finished.length)
            },
          )
          const summary = summaryOf(finished, sets.rungOf)
          bar.done(
            `resolved ${Math.round(summary.resolvedRate * summary.episodes)}/${summary.episodes}`,
          )
          return summary
        })

      // 2. Held-out evaluations of the warm start.
      const warm = `job:${sft.jobId}`
      const before = yield* evaluate("eval before RL", warm, sets.dirs.eval, sets.heldIn)
      const heldOutDir = sets.dirs.ood
      const oodBefore =
        sets.heldOut.length > 0 && heldOutDir !== undefined
          ? yield* evaluate("held-out families before RL", warm, heldOutDir, sets.heldOut)
          : undefined

      // 3. RL from the warm start.
      const batch = o.tasksPerStep * o.samples
      const rounds: RoundSummary[] = []
      let bar = progressBar(`RL update 1/${o.rlSteps}`, batch)
      let sinceStep: EpisodeFinished[] = []
      let roundStarted = Date.now()
      const train = yield* followJob(
        client,
        {
          spec: {
            ...common(o.rlTemperature),
            name: "t1 up: RL",
            kind: JobKind.TRAIN,
            taskSet: sets.dirs.train,
            taskIds: ids(sets.pool),
            policyRef: warm,
            samplesPerTask: o.samples,
            learner: {
              advantageMode: AdvantageMode.GROUP,
              criticWarmupSteps: 0,
              lr: o.lr,
              criticLr: o.lr,
              ppoSteps: o.rlSteps,
              batchTrajectories: batch,
              // On-policy, as the recipe measured: each update's episodes are sampled with the
              // weights of the update before it.
              maxStaleness: 0,
            },
          },
        },
        (e) => {
          const f = finishedOf(e)
          if (f !== undefined) {
            sinceStep.push(f)
            bar.update(sinceStep.length)
          }
          const s = stepOf(e)
          if (s?.phase !== TrainPhase.PPO) return
          const step = Number(s.step)
          // The episodes scored during the update, as the evaluations score theirs (the
          // learner's own reward covers only the groups it kept).
          const score = summaryOf(sinceStep, sets.rungOf)
          sinceStep = []
          bar.done(
            `reward ${score.rewardMean.toFixed(2)}, resolved ${(100 * score.resolvedRate).toFixed(0)}%`,
          )
          rounds.push({
            round: step,
            version: Number(s.policyVersion),
            rewardMean: score.rewardMean,
            resolvedRate: score.resolvedRate,
            trainInferDiff: s.trainInferLogprobAbsDiff,
            mismatchK3: s.mismatchKlK3,
            policyLoss: s.policyLoss,
            valueLoss: s.valueLoss,
            explainedVariance: s.explainedVariance,
            clipfrac: s.clipfrac,
            approxKl: s.approxKl,
            seconds: (Date.now() - roundStarted) / 1000,
          })
          roundStarted = Date.now()
          if (step < o.rlSteps) bar = progressBar(`RL update ${step + 1}/${o.rlSteps}`, batch)
        },
      )

      // 4. The same evaluations on the last update's weights.
      const learnt = `job:${train.jobId}`
      const after = yield* evaluate("eval after RL", learnt, sets.dirs.eval, sets.heldIn)
      const oodAfter =
        oodBefore !== undefined && heldOutDir !== undefined
          ? yield* evaluate("held-out families after RL", learnt, heldOutDir, sets.heldOut)
          : undefined
      const report: UpReport = {
        before,
        after,
        ...(oodBefore && oodAfter ? { oodBefore, oodAfter } : {}),
        rounds,
        sftLosses,
        golden,
        seconds: (Date.now() - started) / 1000,
        driver: o.driver === drivenBy ? o.driver : `${drivenBy} (${o.driver})`,
        tasks: o.taskDirs === undefined ? `task ladder, seed ${o.seed}` : o.taskDirs.train,
        trainTasks: sets.pool.length,
        evalTasks: sets.heldIn.length,
      }
      return report
    }),
  )

export { summaryTable, writeReport }
