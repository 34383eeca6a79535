import { Effect } from "effect"
import {
  type LadderRecipeOptions,
  openLadderRecipe,
  type RecipeScore,
  type RecipeTask,
  resolvedRate,
  scoreTrajectories,
} from "../../actors/recipe/index.ts"
import type { Trajectory } from "../../proto/index.ts"
import type { Bus } from "../../services/bus/index.ts"
import type { Metrics } from "../../services/metrics/index.ts"
import { progressBar } from "./progress.ts"
import {
  type EvalSummary,
  type RoundSummary,
  summaryTable,
  type UpReport,
  writeReport,
} from "./report.ts"

export interface UpOptions extends LadderRecipeOptions {
  readonly out: string
}

const summaryOf = (ts: ReadonlyArray<Trajectory>, score: RecipeScore): EvalSummary => {
  const ok = ts.filter((t) => t.end !== undefined && !t.end.infraFailed && !t.end.unverifiable)
  return {
    episodes: score.episodes,
    resolvedRate: resolvedRate(score),
    rewardMean: score.reward,
    testsPassed: ok.reduce((a, t) => a + (t.end?.testsPassed ?? 0), 0),
    testsTotal: ok.reduce((a, t) => a + (t.end?.testsTotal ?? 0), 0),
    rungs: score.rungs,
  }
}

/**
 * `t1 up`: the whole system in this process on the embedded default, running the T1 recipe on
 * the task ladder (actors/recipe): SFT warm start on a few demonstrations, evaluation on held-out
 * tasks, RL updates through the buffer and the learner, evaluation again, and a report.
 */
export const runUp = (o: UpOptions): Effect.Effect<UpReport, unknown, Bus | Metrics> =>
  Effect.scoped(
    Effect.gen(function* () {
      const started = Date.now()
      const recipe = yield* openLadderRecipe(o)

      const sftBar = progressBar(
        `SFT warm start (${recipe.demos.length} demonstrations)`,
        o.sftSteps,
      )
      const warm = yield* recipe.warmStart((step, loss) =>
        sftBar.update(step, `loss ${loss.toFixed(2)}`),
      )
      sftBar.done(`loss ${warm.losses[0]?.toFixed(2)} → ${warm.losses.at(-1)?.toFixed(2)}`)
      const policy = yield* recipe.startSamplers(warm.model)

      const evaluate = (label: string, version: bigint, tasks: ReadonlyArray<RecipeTask>) =>
        Effect.gen(function* () {
          const n = tasks.length * o.evalSamples
          const bar = progressBar(label, n)
          let done = 0
          const ts = yield* recipe.evaluate(label.replaceAll(" ", "-"), version, tasks, () =>
            bar.update(++done),
          )
          const score = scoreTrajectories(ts, recipe.rungOf)
          bar.done(`resolved ${score.resolved}/${score.episodes}`)
          return summaryOf(ts, score)
        })
      const before = yield* evaluate("eval before RL", 0n, recipe.heldIn)
      const oodBefore =
        recipe.heldOut.length > 0
          ? yield* evaluate("held-out families before RL", 0n, recipe.heldOut)
          : undefined

      const rounds: RoundSummary[] = []
      let bar = progressBar(`RL update 1/${o.rlSteps}`, o.tasksPerStep * o.samples)
      let done = 0
      let roundStarted = Date.now()
      const rl = yield* recipe.reinforce(warm, policy, {
        onEpisode: () => bar.update(++done),
        onStep: (step, score, report) => {
          bar.done(
            `resolved ${score.resolved}/${score.episodes}, reward ${score.reward.toFixed(2)}`,
          )
          rounds.push({
            round: step,
            version: Number(report.version),
            rewardMean: score.reward,
            resolvedRate: resolvedRate(score),
            trainInferDiff: report.trainInferLogprobAbsDiff,
            mismatchK3: report.mismatchKlK3,
            policyLoss: report.policyLoss,
            valueLoss: report.valueLoss,
            explainedVariance: report.explainedVariance,
            clipfrac: report.clipfrac,
            approxKl: report.approxKl,
            seconds: (Date.now() - roundStarted) / 1000,
          })
          roundStarted = Date.now()
          done = 0
          if (step < o.rlSteps)
            bar = progressBar(`RL update ${step + 1}/${o.rlSteps}`, o.tasksPerStep * o.samples)
        },
      })

      const after = yield* evaluate("eval after RL", rl.version, recipe.heldIn)
      const oodAfter =
        recipe.heldOut.length > 0
          ? yield* evaluate("held-out families after RL", rl.version, recipe.heldOut)
          : undefined
      const report: UpReport = {
        before,
        after,
        ...(oodBefore && oodAfter ? { oodBefore, oodAfter } : {}),
        rounds,
        sftLosses: warm.losses,
        golden: warm.sequences.length,
        seconds: (Date.now() - started) / 1000,
        driver: o.driver,
        tasks: o.taskDirs === undefined ? `task ladder, seed ${o.seed}` : o.taskDirs.train,
        trainTasks: recipe.train.length,
        evalTasks: recipe.heldIn.length,
      }
      return report
    }),
  )

export { summaryTable, writeReport }
