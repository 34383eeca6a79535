import { Effect, Layer, Result } from "effect"
import { describe, expect, it } from "vitest"
import { TinyMoe } from "../../model/index.ts"
import type { Trajectory } from "../../proto/index.ts"
import { MemoryBusLive } from "../../services/bus/index.ts"
import { Metrics, makeMetrics } from "../../services/metrics/index.ts"
import { trainingSequence } from "../learner/decode.ts"
import { EMBEDDED_MODEL_CONFIG, EMBEDDED_RL_CONFIG } from "../learner/embedded.ts"
import { temperedLogprobs } from "../learner/ppo/loss.ts"
import { Trainer } from "../learner/trainer.ts"
import {
  informativeGroups,
  LADDER_RECIPE_DEFAULTS,
  meanResolvedTurns,
  openLadderRecipe,
  recipeDefaultsFor,
  recipeLimits,
  scoreTrajectories,
} from "./ladder.ts"

/** Per task, whether its evaluation samples wrote the same token ids. */
const samplesAgree = (trajectories: ReadonlyArray<Trajectory>): boolean[] => {
  const byTask = new Map<string, string[]>()
  for (const t of trajectories) {
    const task = t.end?.task?.taskId ?? ""
    const ids = Buffer.from(t.tokenIds).toString("hex")
    byTask.set(task, [...(byTask.get(task) ?? []), ids])
  }
  return [...byTask.values()].map((ids) => ids.length > 1 && ids.every((x) => x === ids[0]))
}

/** The smallest rung-1 ladder on local sandboxes: a few tasks per family, one turn each. */
const TINY = {
  ...LADDER_RECIPE_DEFAULTS,
  rungs: [1],
  trainPerFamily: 2,
  demos: 1,
  evalPerFamily: 1,
  turns: 1,
  driver: "local",
} as const

/** An untrained policy: at temperature 1 its replies vary, and it resolves nothing. */
const untrained = (vocabSize: number) =>
  TinyMoe.create({ config: { ...EMBEDDED_MODEL_CONFIG, vocabSize }, seed: 3 })

const layers = () =>
  Layer.mergeAll(MemoryBusLive(), Layer.succeed(Metrics, makeMetrics({ defaultMetrics: false })))

describe("ladder recipe evaluation", () => {
  it("samples at evalTemperature: greedy samples of a task agree, temperature-1 samples do not", async () => {
    const run = (evalTemperature: number) =>
      Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const recipe = yield* openLadderRecipe({
              ...TINY,
              evalSamples: 2,
              evalTemperature,
              concurrency: 2,
            })
            yield* recipe.startSamplers(untrained(recipe.tokenizer.vocabSize))
            return yield* recipe.evaluate("t", 0n, recipe.heldIn.slice(0, 3))
          }),
        ).pipe(Effect.provide(layers())),
      )
    const greedy = await run(0)
    expect(greedy).toHaveLength(6)
    expect(samplesAgree(greedy)).toEqual([true, true, true])
    const sampled = await run(1)
    expect(sampled).toHaveLength(6)
    expect(samplesAgree(sampled)).toEqual([false, false, false])
  }, 120_000)

  it("an evaluation with seedsOf draws as the one it names; blind with one turn changes nothing", async () => {
    const byEpisode = (ts: ReadonlyArray<Trajectory>) =>
      Object.fromEntries(ts.map((t) => [t.episodeId, Buffer.from(t.tokenIds).toString("hex")]))
    const { first, paired, fresh } = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const recipe = yield* openLadderRecipe({ ...TINY, evalSamples: 2, concurrency: 2 })
          yield* recipe.startSamplers(untrained(recipe.tokenizer.vocabSize))
          const tasks = recipe.heldIn.slice(0, 2)
          const a = yield* recipe.evaluate("a", 0n, tasks)
          // One turn: its observation is never read, so blind or not the episodes are alike.
          const b = yield* recipe.evaluate("b", 0n, tasks, undefined, { blind: true, seedsOf: "a" })
          const c = yield* recipe.evaluate("c", 0n, tasks)
          const missing = yield* Effect.result(
            recipe.evaluate("d", 0n, tasks, undefined, { seedsOf: "nope" }),
          )
          expect(Result.isFailure(missing)).toBe(true)
          return { first: byEpisode(a), paired: byEpisode(b), fresh: byEpisode(c) }
        }),
      ).pipe(Effect.provide(layers())),
    )
    expect(Object.keys(first)).toHaveLength(4)
    expect(paired).toEqual(first)
    expect(fresh).not.toEqual(first)
  }, 120_000)
})

describe("ladder recipe warm start", () => {
  it("decays the warm start's weights by sftWeightDecay, and the SFT control continues it", async () => {
    const warm = (sftWeightDecay: number) =>
      Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const recipe = yield* openLadderRecipe({
              ...TINY,
              sftSteps: 3,
              sftWeightDecay,
              concurrency: 2,
            })
            return yield* recipe.warmStart()
          }),
        ).pipe(Effect.provide(layers())),
      )
    const [none, some] = [await warm(0), await warm(0.5)]
    expect(none.config.weightDecay).toBe(0)
    expect(some.config.weightDecay).toBe(0.5)
    // The same demonstrations, batches and initialisation: only the decay tells them apart.
    expect(none.losses[0]).toBe(some.losses[0])
    const norm = (w: typeof none) =>
      w.model.entries().reduce((a, e) => {
        let sum = a
        for (const x of e.data) sum += x * x
        return sum
      }, 0)
    expect(norm(some)).toBeLessThan(norm(none))
  }, 180_000)
})

describe("ladder recipe scores and limits", () => {
  it("warm-starts the observation rungs on more demonstrations and SFT steps", () => {
    expect(recipeDefaultsFor([1])).toEqual({ ...LADDER_RECIPE_DEFAULTS, rungs: [1] })
    expect(recipeDefaultsFor([1, 5])).toMatchObject({
      demos: 40,
      trainPerFamily: 80,
      sftSteps: 1500,
    })
    expect(recipeDefaultsFor([7]).rlSteps).toBe(LADDER_RECIPE_DEFAULTS.rlSteps)
  })

  it("a blind evaluation's limits differ from the others' only in blind_observations", () => {
    expect(recipeLimits(5).blindObservations).toBe(false)
    expect(recipeLimits(5, true)).toEqual({ ...recipeLimits(5), blindObservations: true })
  })

  it("counts the turns of resolved episodes only", () => {
    const t = (taskId: string, resolved: boolean, turns: number) =>
      ({
        end: { task: { taskId }, resolved, turns, testsPassed: 0, testsTotal: 1 },
      }) as unknown as Trajectory
    const s = scoreTrajectories([t("a", true, 2), t("a", false, 5), t("b", true, 4)], () => 1)
    expect(s.resolvedTurns).toBe(6)
    expect(meanResolvedTurns(s)).toBe(3)
    expect(meanResolvedTurns(scoreTrajectories([t("a", false, 5)], () => 1))).toBeNull()
  })
})

describe("ladder recipe RL: dynamic sampling", () => {
  it("counts the groups whose verified rewards differ", () => {
    const t = (groupId: string, reward: number, infraFailed = false) =>
      ({ end: { groupId, reward, infraFailed, unverifiable: false } }) as unknown as Trajectory
    expect(
      informativeGroups([
        t("a", 0),
        t("a", 1),
        t("b", 0),
        t("b", 0),
        t("c", 1),
        t("c", 0, true),
        t("d", 0.5),
        t("d", 0.25),
      ]),
    ).toBe(2)
  })

  /** RL updates of 2 tasks × 2 samples from an untrained policy (which resolves nothing). */
  const run = (
    waves: number,
    rlTemperature = 1,
    rlSteps = 1,
    stopBefore?: (stepsDone: number) => boolean,
  ) =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const recipe = yield* openLadderRecipe({
            ...TINY,
            rlSteps,
            tasksPerStep: 2,
            samples: 2,
            waves,
            rlTemperature,
            concurrency: 4,
          })
          const model = untrained(recipe.tokenizer.vocabSize)
          const policy = yield* recipe.startSamplers(model)
          const reports: number[] = []
          const episodes: Trajectory[] = []
          const rl = yield* recipe.reinforce(
            {
              model,
              trainer: new Trainer(model, EMBEDDED_RL_CONFIG),
              config: EMBEDDED_RL_CONFIG,
              sequences: [],
              losses: [],
              skipped: [],
            },
            policy,
            {
              onStep: (_, __, report) => void reports.push(report.sequences),
              onEpisode: (_, t) => void episodes.push(t),
              ...(stopBefore === undefined ? {} : { stopBefore }),
            },
          )
          return {
            episodes: rl.episodes,
            trained: reports,
            sampled: episodes,
            model,
            steps: rl.steps,
            version: rl.version,
          }
        }),
      ).pipe(Effect.provide(layers())),
    )

  it("admits further waves until enough groups vary, and trains on every episode of the step", async () => {
    // No group varies, so every wave allowed is admitted.
    // One wave: 2 tasks × 2 samples. Three: the first, then two more of the same size (the
    // share of informative groups is at its floor of one in four).
    expect(await run(1)).toMatchObject({ episodes: 4, trained: [4] })
    expect(await run(3)).toMatchObject({ episodes: 12, trained: [12] })
  }, 180_000)

  it("ends RL before an update when stopBefore says so, with the learner's last version final", async () => {
    const asked: number[] = []
    const stopped = await run(1, 1, 3, (done) => {
      asked.push(done)
      return done === 2
    })
    expect(asked).toEqual([1, 2])
    expect(stopped).toMatchObject({ episodes: 8, trained: [4, 4], steps: 2, version: 2n })
  }, 180_000)

  it("samples RL episodes at rlTemperature", async () => {
    const { sampled, model } = await run(1, 1.5)
    // The behaviour log-probs of the sampled tokens are the model's at 1.5, not at 1.
    const gap = (temperature: number) => {
      let worst = 0
      for (const t of sampled) {
        const s = Result.getOrThrow(trainingSequence(t, 0n))
        if (s === undefined) continue
        const scored = model.score(s.ids.subarray(0, s.ids.length - 1), { tape: false })
        const lp = temperedLogprobs(
          scored.logits,
          model.config.vocabSize,
          s.ids.subarray(1),
          temperature,
        )
        for (let r = 0; r < lp.length; r++)
          if (s.lossMask[r + 1] === 1)
            worst = Math.max(worst, Math.abs((lp[r] as number) - (s.logprobs[r + 1] as number)))
      }
      return worst
    }
    expect(sampled.length).toBe(4)
    expect(gap(1.5)).toBeLessThan(1e-3)
    expect(gap(1)).toBeGreaterThan(0.05)
  }, 180_000)
})
