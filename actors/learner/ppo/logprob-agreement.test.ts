import { describe, expect, it } from "vitest"
import { logSoftmax, rowLogprob, sampleToken, tokenLogprobs } from "../../../model/index.ts"
import { ppoLoss, temperedLogprobs } from "./index.ts"

/** Deterministic logits with a wide range (large values test the max shift). */
const logitsOf = (rows: number, vocab: number) =>
  Float32Array.from({ length: rows * vocab }, (_, i) => Math.sin(i * 12.9898) * 40 + (i % 7))

describe("one log-softmax: sampler, learner and metrics agree bit for bit", () => {
  const vocab = 97
  const rows = 6
  const logits = logitsOf(rows, vocab)
  const targets = Array.from({ length: rows }, (_, r) => (r * 31) % vocab)

  it("matches a naive f64 log-softmax within rounding", () => {
    for (let r = 0; r < rows; r++) {
      const row = Array.from(logits.subarray(r * vocab, (r + 1) * vocab), Number)
      const max = Math.max(...row)
      const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0))
      expect(rowLogprob(logits, r * vocab, vocab, targets[r] as number)).toBeCloseTo(
        (row[targets[r] as number] as number) - lse,
        12,
      )
    }
  })

  it("the sampler's recorded log-prob equals the learner's recomputation exactly", () => {
    const learner = temperedLogprobs(logits, vocab, targets)
    const ppo = ppoLoss({
      logits,
      vocab,
      targets,
      action: new Float64Array(rows).fill(1),
      proxLogprobs: learner,
      behaviourLogprobs: learner,
      advantages: new Float64Array(rows),
      values: new Float64Array(rows),
      oldValues: new Float64Array(rows),
      returns: new Float64Array(rows),
      clipLow: 0.2,
      clipHigh: 0.2,
      valueCoef: 0.5,
      entropyCoef: 0,
      temperature: 1,
      normalizer: rows,
    })
    for (let r = 0; r < rows; r++) {
      const row = logits.subarray(r * vocab, (r + 1) * vocab)
      const sampled = sampleToken(row, { temperature: 0, topP: 1 }, { next: () => 0.5 })
      const id = sampled.id
      expect(sampled.logprob).toBe(rowLogprob(logits, r * vocab, vocab, id))
      expect(logSoftmax(row)[targets[r] as number]).toBe(learner[r])
      expect(ppo.logprobs[r]).toBe(learner[r])
    }
    expect(Array.from(tokenLogprobs(logits, targets, vocab))).toEqual(Array.from(learner))
  })

  it("a tempered log-prob is the same function at 1/T", () => {
    const t = 0.7
    const learner = temperedLogprobs(logits, vocab, targets, t)
    for (let r = 0; r < rows; r++)
      expect(learner[r]).toBe(rowLogprob(logits, r * vocab, vocab, targets[r] as number, 1 / t))
  })
})
