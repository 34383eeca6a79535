import { describe, expect, it } from "vitest"
import { PpoError } from "./errors.ts"
import {
  explainedVariance,
  mean,
  mismatchKlK3,
  resolvedRate,
  stalenessMean,
  trainInferLogprobAbsDiff,
} from "./metrics.ts"

// Sample A: action rows 0 and 2 with learner − sampler = 0.5 and −1; row 1 is an observation.
// Sample B: one action row, learner − sampler = 0.2. Sample C: no action rows.
const samples = [
  { learner: [-1, -2, -3], sampler: [-1.5, -7, -2], action: [1, 0, 1] },
  { learner: [-0.1], sampler: [-0.3], action: new Uint8Array([1]) },
  { learner: [-4, -5], sampler: [-1, -1], action: [0, 0] },
]

describe("trainInferLogprobAbsDiff", () => {
  it("is the mean over samples of each sample's mean |learner − sampler| on action rows", () => {
    // A: (0.5 + 1) / 2 = 0.75; B: 0.2; C skipped → (0.75 + 0.2) / 2 = 0.475.
    expect(trainInferLogprobAbsDiff(samples)).toBeCloseTo(0.475, 14)
  })

  it("is 0 without action rows and rejects ragged samples", () => {
    expect(trainInferLogprobAbsDiff([])).toBe(0)
    expect(trainInferLogprobAbsDiff([samples[2] as (typeof samples)[2]])).toBe(0)
    expect(() =>
      trainInferLogprobAbsDiff([{ learner: [1, 2], sampler: [1], action: [1, 1] }]),
    ).toThrow(PpoError)
  })
})

describe("mismatchKlK3", () => {
  it("is the pooled mean over action rows of (ρ − 1) − log ρ", () => {
    // log ρ ∈ {0.5, −1, 0.2}: e^0.5 − 1.5 = 0.148721270700, e^−1 − 1 + 1 = 0.367879441171,
    // e^0.2 − 1.2 = 0.021402758160 → mean 0.538003470031 / 3 = 0.179334490010.
    expect(mismatchKlK3(samples)).toBeCloseTo(0.17933449001, 10)
    expect(mismatchKlK3([])).toBe(0)
  })

  it("is 0 when the log-probs agree, and its expectation under the sampler is KL(sampler ‖ learner)", () => {
    expect(mismatchKlK3([{ learner: [-1, -2], sampler: [-1, -2], action: [1, 1] }])).toBe(0)
    const q = [0.5, 0.25, 0.125, 0.125] // sampler
    const p = [0.4, 0.3, 0.2, 0.1] // learner
    let expectation = 0
    let kl = 0
    q.forEach((qi, i) => {
      const pi = p[i] as number
      const k3 = mismatchKlK3([{ learner: [Math.log(pi)], sampler: [Math.log(qi)], action: [1] }])
      expect(k3).toBeGreaterThanOrEqual(0)
      expectation += qi * k3
      kl += qi * Math.log(qi / pi)
    })
    expect(expectation).toBeCloseTo(kl, 14)
  })
})

describe("explainedVariance", () => {
  it("matches hand values", () => {
    expect(explainedVariance([1, 2, 3, 4], [1, 2, 3, 4])).toBe(1)
    // Predicting the mean explains nothing.
    expect(explainedVariance([2.5, 2.5, 2.5, 2.5], [1, 2, 3, 4])).toBeCloseTo(0, 14)
    // G = [0, 2, 4], V = [0, 3, 3]: G − V = [0, −1, 1], Var = 2/3; Var(G) = 8/3 → 1 − 1/4.
    expect(explainedVariance([0, 3, 3], [0, 2, 4])).toBeCloseTo(0.75, 14)
    // Worse than the mean: G = [0, 2], V = [2, 0]: Var(G − V) = 4, Var(G) = 1 → −3.
    expect(explainedVariance([2, 0], [0, 2])).toBeCloseTo(-3, 14)
  })

  it("uses the masked rows only", () => {
    expect(explainedVariance([0, 99, 3, 3, -7], [0, 5, 2, 4, 1], [1, 0, 1, 1, 0])).toBeCloseTo(
      0.75,
      14,
    )
  })

  it("is 0 when the returns do not vary or there are no rows", () => {
    expect(explainedVariance([1, 2, 3], [5, 5, 5])).toBe(0)
    expect(explainedVariance([], [])).toBe(0)
    expect(explainedVariance([1, 2], [1, 3], [0, 0])).toBe(0)
    expect(() => explainedVariance([1, 2], [1])).toThrow(PpoError)
  })
})

describe("helpers", () => {
  it("mean, resolvedRate and stalenessMean", () => {
    expect(mean([1, 2, 6])).toBe(3)
    expect(mean([])).toBe(0)
    expect(
      resolvedRate([
        { resolved: true },
        { resolved: false },
        { resolved: true },
        { resolved: false },
      ]),
    ).toBe(0.5)
    expect(resolvedRate([])).toBe(0)
    expect(stalenessMean(5, [5, 4, 3])).toBe(1)
    expect(stalenessMean(5, [])).toBe(0)
    expect(() => stalenessMean(5, [6])).toThrow("admittedVersions[0]")
  })
})
