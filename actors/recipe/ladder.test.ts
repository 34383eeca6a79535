import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { TinyMoe } from "../../model/index.ts"
import type { Trajectory } from "../../proto/index.ts"
import { MemoryBusLive } from "../../services/bus/index.ts"
import { Metrics, makeMetrics } from "../../services/metrics/index.ts"
import { EMBEDDED_MODEL_CONFIG } from "../learner/embedded.ts"
import { LADDER_RECIPE_DEFAULTS, openLadderRecipe } from "./ladder.ts"

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

describe("ladder recipe evaluation", () => {
  it("samples at evalTemperature: greedy samples of a task agree, temperature-1 samples do not", async () => {
    const run = (evalTemperature: number) =>
      Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const recipe = yield* openLadderRecipe({
              ...LADDER_RECIPE_DEFAULTS,
              rungs: [1],
              trainPerFamily: 2,
              demos: 1,
              evalPerFamily: 1,
              evalSamples: 2,
              evalTemperature,
              turns: 1,
              concurrency: 2,
              driver: "local",
            })
            // An untrained policy: at temperature 1 its replies are far from deterministic.
            const model = TinyMoe.create({
              config: { ...EMBEDDED_MODEL_CONFIG, vocabSize: recipe.tokenizer.vocabSize },
              seed: 3,
            })
            yield* recipe.startSamplers(model)
            return yield* recipe.evaluate("t", 0n, recipe.heldIn.slice(0, 3))
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
    const greedy = await run(0)
    expect(greedy).toHaveLength(6)
    expect(samplesAgree(greedy)).toEqual([true, true, true])
    const sampled = await run(1)
    expect(sampled).toHaveLength(6)
    expect(samplesAgree(sampled)).toEqual([false, false, false])
  }, 120_000)
})
