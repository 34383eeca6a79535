import { describe, expect, it } from "vitest"
import { Rng } from "../rng.ts"
import { tokenLogprobs } from "./losses.ts"
import { TinyMoe } from "./model.ts"
import { optimizerFor, type SupervisedSequence, supervisedStep } from "./train.ts"

/**
 * A small synthetic corpus: each sequence starts at a random token of a cyclic vocabulary and
 * continues with one of two strides, announced by its first token, so a model must attend back
 * to the start to predict well. Uniform guessing costs ln 24 ≈ 3.18 nats per token.
 */
const V = 24
const corpus = (rng: Rng, n: number, len: number): SupervisedSequence[] =>
  Array.from({ length: n }, () => {
    const stride = rng.next() < 0.5 ? 1 : 3
    const marker = stride === 1 ? 0 : 1
    const start = 2 + Math.floor(rng.next() * (V - 2))
    const ids = [marker]
    for (let i = 0; i < len - 1; i++) ids.push(2 + ((start - 2 + i * stride) % (V - 2)))
    // The first prediction (of the random start) is unlearnable, so it is not trained on.
    const weights = Array.from({ length: len - 1 }, (_, t) => (t === 0 ? 0 : 1 / ((len - 2) * n)))
    return { ids, weights }
  })

describe("TinyMoE sanity training", () => {
  it("learns a synthetic corpus: held-out loss below 0.1 nats per token (from ≈3.2) within the step budget", () => {
    const started = Date.now()
    const model = TinyMoe.create({
      config: {
        vocabSize: V,
        dModel: 32,
        nLayers: 2,
        nHeads: 4,
        nExperts: 4,
        topK: 2,
        dFf: 48,
        maxSeqLen: 64,
      },
      seed: 7,
    })
    const optimizer = optimizerFor(model, { lr: 1e-2, weightDecay: 0, maxGradNorm: 1 })
    const rng = new Rng(1)
    const losses: number[] = []
    for (let step = 0; step < 300; step++) {
      const { loss } = supervisedStep(model, optimizer, corpus(rng, 8, 16), { auxLossCoef: 0.01 })
      losses.push(loss)
      if (step > 20 && losses.slice(-10).reduce((a, b) => a + b, 0) / 10 < 0.03) break
    }
    const first = losses[0] as number
    console.log(
      `sanity training: ${losses.length} steps, loss ${first.toFixed(3)} → ${(losses.at(-1) as number).toFixed(3)}`,
    )
    const held = corpus(new Rng(999), 16, 16)
    let heldLoss = 0
    for (const s of held) {
      const scored = model.score(s.ids, { tape: false })
      const lp = tokenLogprobs(scored.logits, Array.from(s.ids).slice(1), V)
      lp.forEach((v, t) => {
        heldLoss -= v * (s.weights[t] as number)
      })
    }
    expect(first).toBeGreaterThan(2.8)
    expect(heldLoss).toBeLessThan(0.1)
    expect(Date.now() - started).toBeLessThan(60_000)
  })
})
