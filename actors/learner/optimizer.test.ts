import { describe, expect, it } from "vitest"
import { mapParams, TinyMoe } from "../../model/index.ts"
import {
  actorOptimizer,
  CRITIC_PARAMS,
  continuedActorOptimizer,
  DEFAULT_LEARNER_CONFIG,
} from "./trainer.ts"

const tiny = { vocabSize: 32, dModel: 16, nLayers: 1, nHeads: 2, nExperts: 2, dFf: 16 }

const gradsOf = (model: TinyMoe, scale: number) =>
  new Map(
    model
      .entries()
      .filter((e) => !CRITIC_PARAMS.has(e.name))
      .map((e) => [e.name, Float32Array.from(e.data, (_, i) => Math.sin(i * scale))]),
  )

describe("continuedActorOptimizer", () => {
  it("takes exactly the next step the warm start's optimiser would take, on a copy of its model", () => {
    const a = TinyMoe.create({ config: tiny, seed: 3 })
    const optA = actorOptimizer(a, DEFAULT_LEARNER_CONFIG)
    optA.step(gradsOf(a, 0.1), 1e-2)
    optA.step(gradsOf(a, 0.2), 1e-2)
    const b = TinyMoe.fromParams(
      a.config,
      mapParams(a.config, a.params, "f32", (d) => d),
      "f32",
    )
    const optB = continuedActorOptimizer(b, DEFAULT_LEARNER_CONFIG, optA.state())
    const fresh = TinyMoe.fromParams(
      a.config,
      mapParams(a.config, a.params, "f32", (d) => d),
      "f32",
    )
    const optFresh = actorOptimizer(fresh, DEFAULT_LEARNER_CONFIG)
    optA.step(gradsOf(a, 0.3), 1e-2)
    optB.step(gradsOf(b, 0.3), 1e-2)
    optFresh.step(gradsOf(fresh, 0.3), 1e-2)
    const data = (m: TinyMoe) => m.entries().map((e) => Array.from(e.data))
    expect(data(b)).toEqual(data(a))
    expect(data(fresh)).not.toEqual(data(a))
  })
})
