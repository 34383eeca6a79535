import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { PpoError } from "./errors.ts"
import { type PpoLossInput, ppoLoss, temperedLogprobs } from "./loss.ts"

const LN2 = Math.log(2)
const LN3 = Math.log(3)

describe("ppoLoss: hand-computed case", () => {
  // Two action rows, vocab 3, T = 1, clip ε = (0.2, 0.28), TIS threshold 2, normalizer 2,
  // entropyCoef 0.01, valueCoef 0.5, valueClip 0.2.
  //
  // Row 0: logits [0, 0, 0] → p = [1/3, 1/3, 1/3], target 0, logp = −ln 3, H = ln 3.
  //   prox = logp → ratio 1; A = 2 → min(2, 2) = 2 (unclipped branch).
  //   behaviour = prox − ln 3 → exp(prox − behaviour) = 3 ≥ 2 → w = 2 (TIS clipped).
  //   token policy loss = −2 · 2 = −4.
  //   ∂loss/∂logp = −w · ratio · A / normalizer = −2 · 1 · 2 / 2 = −2;
  //   ∂logp/∂z = onehot − p = [2/3, −1/3, −1/3] → policy part [−4/3, 2/3, 2/3];
  //   at the uniform distribution ∂H/∂z_j = −p_j (log p_j + H) = 0.
  // Row 1: logits [0, ln 2, 0] → p = [1/4, 1/2, 1/4], target 1, logp = −ln 2,
  //   H = −(2 · ¼ · ln ¼ + ½ · ln ½) = 1.5 ln 2.
  //   prox = logp − ln 1.5 → ratio 1.5 > 1.28; A = 1 → min(1.5, 1.28) = 1.28: clipped, no
  //   policy gradient. behaviour = prox + ln 2 → w = ½. token policy loss = −0.64.
  //   ∂loss/∂H = −0.01 / 2 = −0.005; ∂H/∂z = −p ⊙ (log p + H)
  //     = −[¼ · (−2 ln2 + 1.5 ln2), ½ · (−ln2 + 1.5 ln2), ¼ · (−0.5 ln2)] = [ln2/8, −ln2/4, ln2/8]
  //   → dLogits row 1 = −0.005 · [ln2/8, −ln2/4, ln2/8].
  // Values: V = [0.5, 1], V_old = [0.5, 0.5], G = [1.5, 2].
  //   Row 0: V − V_old = 0 → both branches (0.5 − 1.5)² = 1 → 0.5; ∂/∂V = V − G = −1.
  //   Row 1: V − V_old = 0.5 → clipped V = 0.7: (1 − 2)² = 1 < (0.7 − 2)² = 1.69 → 0.845,
  //     clipped branch, ∂/∂V = 0.
  //   valueLoss = (0.5 + 0.845) / 2 = 0.6725; dValues = 0.5 · [−1, 0] / 2 = [−0.25, 0].
  // policyLoss = (−4 − 0.64) / 2 = −2.32; Σ H = ln 3 + 1.5 ln 2.
  // loss = (−4.64 − 0.01 · (ln 3 + 1.5 ln 2)) / 2 + 0.5 · 0.6725
  //      = (−4.64 − 0.021383330595) / 2 + 0.33625 = −1.994441665298
  // approxKl (k3) = mean(0, (1.5 − 1) − ln 1.5) = (0.5 − 0.405465108108) / 2 = 0.047267445946
  const logp0 = -LN3
  const logp1 = -LN2
  const prox = [logp0, logp1 - Math.log(1.5)]
  const input: PpoLossInput = {
    logits: new Float64Array([0, 0, 0, 0, LN2, 0]),
    vocab: 3,
    targets: new Int32Array([0, 1]),
    action: new Uint8Array([1, 1]),
    behaviourLogprobs: [(prox[0] as number) - LN3, (prox[1] as number) + LN2],
    proxLogprobs: prox,
    advantages: [2, 1],
    values: new Float64Array([0.5, 1]),
    oldValues: [0.5, 0.5],
    returns: [1.5, 2],
    clipLow: 0.2,
    clipHigh: 0.28,
    valueClip: 0.2,
    valueCoef: 0.5,
    entropyCoef: 0.01,
    tisThreshold: 2,
    normalizer: 2,
  }

  it("gives the written-out losses and statistics", () => {
    const out = ppoLoss(input)
    expect(out.loss).toBeCloseTo(-1.994441665298, 11)
    expect(out.policyLoss).toBeCloseTo(-2.32, 12)
    expect(out.valueLoss).toBeCloseTo(0.6725, 12)
    expect(out.entropy).toBeCloseTo((LN3 + 1.5 * LN2) / 2, 12)
    expect(out.clipfrac).toBe(0.5)
    expect(out.tisClipfrac).toBe(0.5)
    expect(out.valueClipfrac).toBe(0.5)
    expect(out.approxKl).toBeCloseTo(0.047267445946, 11)
    // Ratios 1 and 1.5.
    expect(out.ratioMean).toBeCloseTo(1.25, 12)
    expect(out.ratioMin).toBeCloseTo(1, 12)
    expect(out.ratioMax).toBeCloseTo(1.5, 12)
    expect(out.actionRows).toBe(2)
    expect(out.valueRows).toBe(2)
    expect(out.logprobs[0]).toBeCloseTo(logp0, 14)
    expect(out.logprobs[1]).toBeCloseTo(logp1, 14)
  })

  it("gives the written-out gradients", () => {
    const out = ppoLoss(input)
    const expected = [
      -4 / 3,
      2 / 3,
      2 / 3,
      (-0.005 * LN2) / 8,
      (0.005 * LN2) / 4,
      (-0.005 * LN2) / 8,
    ]
    for (const [i, e] of expected.entries()) expect(out.dLogits[i]).toBeCloseTo(e, 12)
    expect(out.dValues[0]).toBeCloseTo(-0.25, 12)
    expect(out.dValues[1]).toBe(0)
  })
})

/** Deterministic PRNG for the random cases (mulberry32). */
const rng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

interface CaseOptions {
  readonly seed: number
  readonly temperature?: number
  readonly tisThreshold?: number
  readonly valueClip?: number
  readonly policyWeight?: number
  readonly valueRows?: "all" | "action"
  readonly entropyCoef?: number
  readonly valueNormalizer?: number
  /** Ratios π/π_prox to place on the action rows (cycled); all kept away from the clip edges. */
  readonly ratios?: ReadonlyArray<number>
}

const ROWS = 9
const VOCAB = 5
const ACTION = new Uint8Array([1, 1, 0, 1, 1, 0, 0, 1, 1])

/**
 * A random batch whose ratios, TIS weights and value offsets are placed well away from every
 * kink of the loss (the clip edges, the ties of the min and of the max), so that a central
 * difference never straddles one.
 */
const randomCase = (o: CaseOptions): PpoLossInput => {
  const rand = rng(o.seed)
  const pick = <T>(xs: ReadonlyArray<T>): T => xs[Math.floor(rand() * xs.length)] as T
  const sign = () => (rand() < 0.5 ? -1 : 1)
  const temperature = o.temperature ?? 1
  const logits = new Float64Array(ROWS * VOCAB).map(() => (rand() - 0.5) * 4)
  const targets = new Int32Array(ROWS).map(() => Math.floor(rand() * VOCAB))
  const logp = temperedLogprobs(logits, VOCAB, targets, temperature)
  const ratios = o.ratios ?? [0.5, 0.9, 1.1, 1.6]
  const proxLogprobs = new Float64Array(ROWS)
  const behaviourLogprobs = new Float64Array(ROWS)
  const advantages = new Float64Array(ROWS)
  let k = 0
  for (let r = 0; r < ROWS; r++) {
    const ratio = ratios[k++ % ratios.length] as number
    proxLogprobs[r] = (logp[r] as number) - Math.log(ratio)
    behaviourLogprobs[r] = (proxLogprobs[r] as number) - Math.log(pick([0.5, 1.5, 3]))
    advantages[r] = sign() * (0.3 + 1.7 * rand())
  }
  const values = new Float64Array(ROWS).map(() => (rand() - 0.5) * 4)
  const oldValues = values.map((v) => v - pick([0.1, -0.1, 0.5, -0.5]))
  const returns = values.map((v) => v + sign() * (0.3 + 0.7 * rand()))
  const input: PpoLossInput = {
    logits,
    vocab: VOCAB,
    targets,
    action: ACTION,
    behaviourLogprobs,
    proxLogprobs,
    advantages,
    values,
    oldValues,
    returns,
    clipLow: 0.2,
    clipHigh: 0.28,
    valueCoef: 0.5,
    entropyCoef: o.entropyCoef ?? 0.01,
    temperature,
    normalizer: 6.5,
    policyWeight: o.policyWeight ?? 1,
    valueRows: o.valueRows ?? "all",
  }
  return {
    ...input,
    ...(o.tisThreshold === undefined ? {} : { tisThreshold: o.tisThreshold }),
    ...(o.valueClip === undefined ? {} : { valueClip: o.valueClip }),
    ...(o.valueNormalizer === undefined ? {} : { valueNormalizer: o.valueNormalizer }),
  }
}

/** Max over entries of |analytic − central difference|, relative to max(1, |analytic|). */
const gradError = (
  input: PpoLossInput,
  field: "logits" | "values",
  analytic: Float64Array,
): number => {
  const h = 1e-6
  const x = Float64Array.from(input[field])
  let worst = 0
  for (let i = 0; i < x.length; i++) {
    const x0 = x[i] as number
    x[i] = x0 + h
    const up = ppoLoss({ ...input, [field]: x }).loss
    x[i] = x0 - h
    const down = ppoLoss({ ...input, [field]: x }).loss
    x[i] = x0
    const numeric = (up - down) / (2 * h)
    const a = analytic[i] as number
    worst = Math.max(worst, Math.abs(a - numeric) / Math.max(1, Math.abs(a)))
  }
  return worst
}

const checkGradients = (input: PpoLossInput) => {
  const out = ppoLoss(input)
  expect(gradError(input, "logits", out.dLogits)).toBeLessThan(1e-7)
  expect(gradError(input, "values", out.dValues)).toBeLessThan(1e-7)
  return out
}

describe("ppoLoss: gradients against central finite differences (float64)", () => {
  it("T = 1, TIS off, clipped value loss: both policy branches and both value branches", () => {
    for (const seed of [1, 2, 3]) {
      const out = checkGradients(randomCase({ seed, valueClip: 0.2 }))
      expect(out.clipfrac).toBeGreaterThan(0)
      expect(out.clipfrac).toBeLessThan(1)
      expect(out.tisClipfrac).toBe(0)
    }
    // Over the seeds, the clipped value branch is taken somewhere and not everywhere.
    const fracs = [1, 2, 3, 4, 5].map(
      (seed) => ppoLoss(randomCase({ seed, valueClip: 0.2 })).valueClipfrac,
    )
    expect(Math.max(...fracs)).toBeGreaterThan(0)
    expect(Math.min(...fracs)).toBeLessThan(1)
  })

  it("T = 0.7 with TIS (threshold 2) and an unclipped value loss", () => {
    for (const seed of [11, 12, 13]) {
      const out = checkGradients(randomCase({ seed, temperature: 0.7, tisThreshold: 2 }))
      expect(out.valueClipfrac).toBe(0)
    }
    const tis = [11, 12, 13, 14].map(
      (seed) => ppoLoss(randomCase({ seed, temperature: 0.7, tisThreshold: 2 })).tisClipfrac,
    )
    expect(Math.max(...tis)).toBeGreaterThan(0)
  })

  it("T = 1.3, large entropy weight, value loss on action rows only, given normalizers", () => {
    for (const seed of [21, 22]) {
      const out = checkGradients(
        randomCase({
          seed,
          temperature: 1.3,
          entropyCoef: 0.3,
          valueRows: "action",
          valueClip: 0.2,
          valueNormalizer: 3,
          tisThreshold: 1.2,
        }),
      )
      expect(out.valueRows).toBe(6)
      ACTION.forEach((a, r) => {
        if (a === 0) expect(out.dValues[r]).toBe(0)
      })
    }
  })

  it("on-policy (ratio 1 everywhere): nothing is clipped and the k3 KL is 0", () => {
    const out = checkGradients(randomCase({ seed: 31, ratios: [1], tisThreshold: 2 }))
    expect(out.clipfrac).toBe(0)
    expect(out.approxKl).toBeCloseTo(0, 14)
  })

  it("policyWeight 0 (critic warm-up): zero dLogits, the value gradient unchanged", () => {
    const input = randomCase({ seed: 41, valueClip: 0.2, tisThreshold: 2, temperature: 0.7 })
    const warm = checkGradients({ ...input, policyWeight: 0 })
    expect(warm.dLogits.every((g) => g === 0)).toBe(true)
    const full = ppoLoss(input)
    expect(Array.from(warm.dValues)).toEqual(Array.from(full.dValues))
    expect(warm.loss).toBeCloseTo(0.5 * full.valueLoss, 14)
    // The statistics are still reported.
    expect(warm.policyLoss).toBe(full.policyLoss)
    expect(warm.entropy).toBe(full.entropy)
  })

  it("holds on random configurations (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.constantFrom(0.5, 0.7, 1, 1.5),
        fc.option(fc.constantFrom(1, 2, 5), { nil: undefined }),
        fc.option(fc.constant(0.2), { nil: undefined }),
        fc.constantFrom(0, 0.5, 1),
        fc.constantFrom<"all" | "action">("all", "action"),
        (seed, temperature, tisThreshold, valueClip, policyWeight, valueRows) => {
          const input = randomCase({
            seed,
            temperature,
            policyWeight,
            valueRows,
            ...(tisThreshold === undefined ? {} : { tisThreshold }),
            ...(valueClip === undefined ? {} : { valueClip }),
          })
          const out = ppoLoss(input)
          expect(gradError(input, "logits", out.dLogits)).toBeLessThan(1e-7)
          expect(gradError(input, "values", out.dValues)).toBeLessThan(1e-7)
        },
      ),
      { numRuns: 40 },
    )
  })
})

describe("ppoLoss: structure", () => {
  it("each row of dLogits sums to 0 (the loss ignores a constant added to a row)", () => {
    const out = ppoLoss(randomCase({ seed: 51, tisThreshold: 2, temperature: 0.7 }))
    for (let r = 0; r < ROWS; r++) {
      let s = 0
      for (let j = 0; j < VOCAB; j++) s += out.dLogits[r * VOCAB + j] as number
      expect(Math.abs(s)).toBeLessThan(1e-15)
    }
  })

  it("is zero on rows that are not actions (no policy gradient on observations)", () => {
    const out = ppoLoss(randomCase({ seed: 52 }))
    ACTION.forEach((a, r) => {
      if (a !== 0) return
      for (let j = 0; j < VOCAB; j++) expect(out.dLogits[r * VOCAB + j]).toBe(0)
      expect(out.logprobs[r]).toBe(0)
    })
  })

  it("on-policy without entropy is the vanilla policy gradient −w·A·(onehot − p)/(T·N)", () => {
    const input = { ...randomCase({ seed: 53, ratios: [1], temperature: 0.7 }), entropyCoef: 0 }
    const out = ppoLoss(input)
    const T = 0.7
    for (let r = 0; r < ROWS; r++) {
      if (ACTION[r] === 0) continue
      const row = Array.from(input.logits.subarray(r * VOCAB, (r + 1) * VOCAB)).map((x) => x / T)
      const m = Math.max(...row)
      const z = row.reduce((acc, x) => acc + Math.exp(x - m), 0)
      const A = input.advantages[r] as number
      for (let j = 0; j < VOCAB; j++) {
        const p = Math.exp((row[j] as number) - m) / z
        const onehot = j === input.targets[r] ? 1 : 0
        expect(out.dLogits[r * VOCAB + j]).toBeCloseTo((-A * (onehot - p)) / (T * 6.5), 12)
      }
    }
  })

  it("accepts float32 logits and values, computing in float64", () => {
    const input = randomCase({ seed: 54, tisThreshold: 2, valueClip: 0.2 })
    const logits32 = Float32Array.from(input.logits)
    const values32 = Float32Array.from(input.values)
    const a = ppoLoss({
      ...input,
      logits: Float64Array.from(logits32),
      values: Float64Array.from(values32),
    })
    const b = ppoLoss({ ...input, logits: logits32, values: values32 })
    expect(b.loss).toBe(a.loss)
    expect(Array.from(b.dLogits)).toEqual(Array.from(a.dLogits))
  })

  it("handles a batch without action rows (only the value loss)", () => {
    const input = { ...randomCase({ seed: 55 }), action: new Uint8Array(ROWS) }
    const out = ppoLoss(input)
    expect(out.actionRows).toBe(0)
    expect(out.entropy).toBe(0)
    expect(out.clipfrac).toBe(0)
    expect(out.approxKl).toBe(0)
    expect(out.dLogits.every((g) => g === 0)).toBe(true)
    expect(out.loss).toBeCloseTo(0.5 * out.valueLoss, 14)
    expect(ppoLoss({ ...input, valueRows: "action" }).loss).toBe(0)
  })

  it("temperedLogprobs agrees with the loss's log-probs", () => {
    const input = randomCase({ seed: 56, temperature: 0.7 })
    const out = ppoLoss(input)
    const lp = temperedLogprobs(input.logits, VOCAB, input.targets, 0.7)
    ACTION.forEach((a, r) => {
      if (a !== 0) expect(out.logprobs[r]).toBeCloseTo(lp[r] as number, 14)
    })
  })

  it("rejects malformed inputs", () => {
    const input = randomCase({ seed: 57 })
    expect(() => ppoLoss({ ...input, logits: new Float64Array(3) })).toThrow(PpoError)
    expect(() => ppoLoss({ ...input, returns: [1] })).toThrow("returns")
    expect(() => ppoLoss({ ...input, targets: new Int32Array(ROWS).fill(VOCAB) })).toThrow(
      "targets[0]",
    )
    expect(() => ppoLoss({ ...input, normalizer: 0 })).toThrow("normalizer")
    expect(() => ppoLoss({ ...input, temperature: 0 })).toThrow("temperature")
    expect(() => ppoLoss({ ...input, tisThreshold: -1 })).toThrow("tisThreshold")
    const nan = Float64Array.from(input.advantages)
    nan[0] = Number.NaN
    expect(() => ppoLoss({ ...input, advantages: nan })).toThrow("advantages[0]")
    // Non-action rows are not read for the policy: NaN behaviour log-probs there are fine.
    const beh = Float64Array.from(input.behaviourLogprobs)
    beh[2] = Number.NaN
    expect(
      Number.isFinite(ppoLoss({ ...input, behaviourLogprobs: beh, tisThreshold: 2 }).loss),
    ).toBe(true)
  })
})
