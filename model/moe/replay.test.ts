import { describe, expect, it } from "vitest"
import type { Kernels } from "../kernels/kernels.ts"
import { referenceKernels } from "../kernels/reference.ts"
import { selectKernels } from "../kernels/select.ts"
import { Rng } from "../rng.ts"
import { generateBatch, type SamplingParams } from "./generate.ts"
import { tokenLogprobs } from "./losses.ts"
import { TinyMoe } from "./model.ts"
import { Sequence } from "./sequence.ts"

const config = {
  vocabSize: 64,
  dModel: 32,
  nLayers: 2,
  nHeads: 4,
  nExperts: 8,
  topK: 2,
  dFf: 48,
  maxSeqLen: 256,
}
const params: SamplingParams = { temperature: 1, topP: 1, maxTokens: 48, stopTokenIds: new Set() }
const prompt = [1, 5, 9, 13, 2, 7, 7, 30, 41, 3]

const sample = (model: TinyMoe, seed: number) => {
  const sequence = new Sequence(model)
  sequence.append(prompt)
  const [generated] = generateBatch(model, [{ sequence, params, rng: new Rng(seed) }])
  if (!generated) throw new Error("no generation")
  return { sequence, generated }
}

/** Re-scores everything the sampler pushed through the model (all tokens but the last). */
const rescore = (model: TinyMoe, sequence: Sequence, replay: boolean) => {
  const ids = sequence.tokens.slice(0, sequence.processed)
  const result = model.score(ids, replay ? { replay: sequence.routing() } : { tape: false })
  const targets = sequence.tokens.slice(1)
  return {
    routing: result.routing,
    logprobs: tokenLogprobs(result.logits, targets, model.config.vocabSize),
  }
}

const differing = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let n = 0
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) n++
  return n
}

// The plain reference and the default kernels (wasm SIMD products, tiled attention for runs of
// rows, block products for decode rows).
describe.each([
  { label: "reference kernels", kernels: referenceKernels as Kernels },
  { label: "auto kernels", kernels: selectKernels("auto") },
])("routing capture and replay (R3), $label", ({ kernels }) => {
  it("records one routing row per processed position, in the contract's [positions, layers, top_k] layout", () => {
    const model = TinyMoe.create({ config, seed: 3, kernels })
    const { sequence, generated } = sample(model, 1)
    expect(generated.tokens).toHaveLength(params.maxTokens)
    expect(generated.stopReason).toBe("max_tokens")
    expect(sequence.processed).toBe(prompt.length + params.maxTokens - 1)
    const routing = sequence.routing()
    expect(routing.length).toBe(sequence.processed * config.nLayers * config.topK)
    for (let i = 0; i < routing.length; i += 2) expect(routing[i]).not.toBe(routing[i + 1])
  })

  it("training forward gives the sampler's expert choices and log-probs (within 1e-5), recomputed or replayed", () => {
    const model = TinyMoe.create({ config, seed: 3, kernels })
    const { sequence, generated } = sample(model, 2)
    const start = generated.start
    for (const replay of [false, true]) {
      const scored = rescore(model, sequence, replay)
      expect(differing(scored.routing, sequence.routing())).toBe(0)
      generated.logprobs.forEach((lp, i) => {
        expect(Math.abs((scored.logprobs[start - 1 + i] as number) - lp)).toBeLessThan(1e-5)
      })
    }
  })

  it("after a weight change that flips recomputed routing, replay still holds the recorded choices", () => {
    const model = TinyMoe.create({ config, seed: 3, kernels })
    const { sequence } = sample(model, 4)
    const rng = new Rng(99)
    for (const layer of model.params.layers)
      for (let i = 0; i < layer.router.length; i++)
        layer.router[i] = (layer.router[i] as number) + 0.05 * rng.normal()
    const recomputed = rescore(model, sequence, false)
    const replayed = rescore(model, sequence, true)
    const flips = differing(recomputed.routing, sequence.routing())
    expect(flips).toBeGreaterThan(sequence.routing().length / 10)
    expect(differing(replayed.routing, sequence.routing())).toBe(0)
  })

  it("batched generation produces exactly the tokens, log-probs and routing of one-at-a-time generation", () => {
    const model = TinyMoe.create({ config, seed: 5, kernels })
    const single = [11, 12, 13].map((seed) => sample(model, seed))
    const sequences = [11, 12, 13].map(() => {
      const s = new Sequence(model)
      s.append(prompt)
      return s
    })
    const batched = generateBatch(
      model,
      sequences.map((sequence, i) => ({
        sequence,
        params: { ...params, maxTokens: 20 + 10 * i },
        rng: new Rng(11 + i),
      })),
    )
    batched.forEach((g, i) => {
      const one = single[i] as (typeof single)[number]
      expect(g.tokens).toEqual(one.generated.tokens.slice(0, g.tokens.length))
      expect(g.logprobs).toEqual(one.generated.logprobs.slice(0, g.tokens.length))
      const seq = sequences[i] as Sequence
      expect(differing(seq.routing(), one.sequence.routing(0, seq.processed))).toBe(0)
    })
  })

  it("a stop token ends generation and is kept; the sequence continues with the next turn", () => {
    const model = TinyMoe.create({ config, seed: 3, kernels })
    const sequence = new Sequence(model)
    sequence.append(prompt)
    const probe = generateBatch(model, [
      { sequence, params: { ...params, temperature: 0, maxTokens: 5 }, rng: new Rng(0) },
    ])[0]
    const stopAt = probe?.tokens[2] as number
    const again = new Sequence(model)
    again.append(prompt)
    const [g] = generateBatch(model, [
      {
        sequence: again,
        params: { ...params, temperature: 0, stopTokenIds: new Set([stopAt]) },
        rng: new Rng(0),
      },
    ])
    expect(g?.stopReason).toBe("stop_token")
    expect(g?.tokens.at(-1)).toBe(stopAt)
    again.append([4, 4, 4])
    again.flush()
    expect(again.processed).toBe(again.tokens.length)
  })
})
