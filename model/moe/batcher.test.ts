import { describe, expect, it } from "vitest"
import { Rng } from "../rng.ts"
import { ContinuousBatcher } from "./batcher.ts"
import type { Generated, SamplingParams } from "./generate.ts"
import { TinyMoe } from "./model.ts"
import { Sequence } from "./sequence.ts"

const config = {
  vocabSize: 48,
  dModel: 16,
  nLayers: 2,
  nHeads: 2,
  nExperts: 4,
  topK: 2,
  dFf: 24,
  maxSeqLen: 128,
}
const params: SamplingParams = {
  temperature: 0.8,
  topP: 0.95,
  maxTokens: 24,
  stopTokenIds: new Set(),
}

const alone = (model: TinyMoe, prompt: number[], seed: number) => {
  const sequence = new Sequence(model)
  sequence.append(prompt)
  const batcher = new ContinuousBatcher(model)
  let out: Generated | undefined
  batcher.add({ sequence, params, rng: new Rng(seed) }, (g) => {
    out = g
  })
  while (batcher.size > 0) batcher.step()
  return { generated: out as Generated, routing: sequence.routing() }
}

describe("continuous batching", () => {
  it("a request joining mid-flight and one leaving early get the tokens and routing they get alone", () => {
    const model = TinyMoe.create({ config, seed: 2 })
    const a = { prompt: [1, 2, 3, 4], seed: 1 }
    const b = { prompt: [9, 8, 7], seed: 2 }
    const seqA = new Sequence(model)
    seqA.append(a.prompt)
    const seqB = new Sequence(model)
    seqB.append(b.prompt)
    const batcher = new ContinuousBatcher(model)
    const out: Record<string, Generated> = {}
    batcher.add({ sequence: seqA, params, rng: new Rng(a.seed) }, (g) => {
      out.a = g
    })
    for (let i = 0; i < 5; i++) batcher.step()
    batcher.add(
      { sequence: seqB, params: { ...params, maxTokens: 10 }, rng: new Rng(b.seed) },
      (g) => {
        out.b = g
      },
    )
    let steps = 0
    while (batcher.size > 0) {
      batcher.step()
      steps++
    }
    const soloA = alone(model, a.prompt, a.seed)
    const soloB = alone(model, b.prompt, b.seed)
    expect(out.a?.tokens).toEqual(soloA.generated.tokens)
    expect(out.a?.logprobs).toEqual(soloA.generated.logprobs)
    expect(out.b?.tokens).toEqual(soloB.generated.tokens.slice(0, 10))
    expect(seqA.routing()).toEqual(soloA.routing)
    expect(steps).toBeLessThan(params.maxTokens)
  })
})
