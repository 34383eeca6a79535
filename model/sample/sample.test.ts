import { describe, expect, it } from "vitest"
import { Rng } from "../rng.ts"
import { SamplingError } from "./errors.ts"
import { logSoftmax, type RandomSource, type SamplingParams, sampleToken } from "./sample.ts"

/** A source that returns the given draws in turn, counting them. */
class Draws implements RandomSource {
  used = 0
  constructor(private readonly values: number[]) {}
  next(): number {
    const v = this.values[this.used % this.values.length] as number
    this.used++
    return v
  }
}

const softmax = (x: number[], t = 1): number[] => {
  const m = Math.max(...x)
  const e = x.map((v) => Math.exp((v - m) / t))
  const s = e.reduce((a, b) => a + b, 0)
  return e.map((v) => v / s)
}

function frequencies(
  logits: Float32Array | Float64Array,
  params: SamplingParams,
  draws: number,
  seed = 7,
) {
  const rng = new Rng(seed)
  const counts = new Array<number>(logits.length).fill(0)
  for (let i = 0; i < draws; i++) {
    const { id } = sampleToken(logits, params, rng)
    counts[id] = (counts[id] as number) + 1
  }
  return counts.map((c) => c / draws)
}

function messageOf(f: () => unknown): string {
  try {
    f()
  } catch (e) {
    if (e instanceof SamplingError) return e.message
    throw e
  }
  throw new Error("expected a SamplingError")
}

// Probabilities 0.1, 0.5, 0.15, 0.25 (in index order), so the sorted order is 1, 3, 2, 0.
const probs = [0.1, 0.5, 0.15, 0.25]
const logits = new Float64Array(probs.map(Math.log))

describe("sampleToken", () => {
  it("temperature 0 is greedy: argmax, lowest index on ties, no draw used", () => {
    const rng = new Draws([0.5])
    const row = new Float32Array([1, 3, 3, 2])
    const out = sampleToken(row, { temperature: 0, topP: 1 }, rng)
    expect(out.id).toBe(1)
    expect(out.logprob).toBeCloseTo(logSoftmax(row)[1] as number, 12)
    expect(out.sampledLogprob).toBe(0)
    expect(rng.used).toBe(0)
    // top-k / top-p do not matter when greedy.
    expect(sampleToken(row, { temperature: 0, topP: 0.1, topK: 1 }, rng).id).toBe(1)
  })

  it("samples softmax(logits / T): frequencies over 20k draws", () => {
    const raw = [2, 1, 0.5, -1, 0]
    for (const t of [1, 0.7, 2]) {
      const got = frequencies(new Float32Array(raw), { temperature: t, topP: 1 }, 20_000)
      const want = softmax(raw, t)
      // The standard error is at most √(0.25 / 20000) ≈ 0.0035; allow about 3σ.
      got.forEach((f, i) => {
        expect(Math.abs(f - (want[i] as number)), `T=${t} token ${i}`).toBeLessThan(0.011)
      })
    }
  })

  it("top-p keeps the smallest most-probable set reaching topP, exactly", () => {
    // topP 0.7: 0.5 (token 1) < 0.7, 0.5 + 0.25 (token 3) = 0.75 ≥ 0.7 → keep {1, 3}.
    const f = frequencies(logits, { temperature: 1, topP: 0.7 }, 20_000)
    expect(f[0]).toBe(0)
    expect(f[2]).toBe(0)
    expect(Math.abs((f[1] as number) - 2 / 3)).toBeLessThan(0.011)
    expect(Math.abs((f[3] as number) - 1 / 3)).toBeLessThan(0.011)
    // A draw at the very top of [0, 1) lands on the last kept token, not the excluded tail.
    const top = sampleToken(logits, { temperature: 1, topP: 0.7 }, new Draws([0.9999999]))
    expect(top.id).toBe(3)
    expect(top.logprob).toBeCloseTo(Math.log(0.25), 12)
    expect(top.sampledLogprob).toBeCloseTo(Math.log(0.25 / 0.75), 12)
    // In descending order of probability: draws below 0.5/0.75 pick token 1.
    expect(sampleToken(logits, { temperature: 1, topP: 0.7 }, new Draws([0.66])).id).toBe(1)
    expect(sampleToken(logits, { temperature: 1, topP: 0.7 }, new Draws([0.67])).id).toBe(3)
    // topP 0.9: 0.5 + 0.25 + 0.15 = 0.9 is on the boundary; 0.91 needs all four.
    expect(sampleToken(logits, { temperature: 1, topP: 0.91 }, new Draws([0.9999])).id).toBe(0)
    // At least one token is always kept.
    const only = sampleToken(logits, { temperature: 1, topP: 0.01 }, new Draws([0.9999]))
    expect(only).toMatchObject({ id: 1 })
    expect(only.sampledLogprob).toBeCloseTo(0, 12)
    expect(only.logprob).toBeCloseTo(Math.log(0.5), 12)
  })

  it("top-k keeps the k most probable, then top-p applies to the renormalised rest", () => {
    const f = frequencies(logits, { temperature: 1, topP: 1, topK: 2 }, 20_000)
    expect(f[0]).toBe(0)
    expect(f[2]).toBe(0)
    expect(Math.abs((f[1] as number) - 2 / 3)).toBeLessThan(0.011)
    // Top 3 hold 0.9; renormalised they are 0.5/0.9, 0.25/0.9, 0.15/0.9. topP 0.8 needs
    // 0.8·0.9 = 0.72 → tokens 1 and 3 (0.75).
    const out = sampleToken(logits, { temperature: 1, topP: 0.8, topK: 3 }, new Draws([0.9999]))
    expect(out.id).toBe(3)
    expect(out.sampledLogprob).toBeCloseTo(Math.log(0.25 / 0.75), 12)
    // topK larger than the vocabulary is no limit.
    expect(sampleToken(logits, { temperature: 1, topP: 1, topK: 99 }, new Draws([0.9999])).id).toBe(
      3,
    )
  })

  it("logprob is the log-softmax of the raw logits, whatever the temperature and top-p", () => {
    const rng = new Rng(3)
    const row = new Float32Array(50).map(() => rng.normal() * 3)
    const reference = logSoftmax(row)
    const direct = softmax([...row]).map(Math.log)
    reference.forEach((v, i) => {
      expect(v).toBeCloseTo(direct[i] as number, 12)
    })
    for (const params of [
      { temperature: 1, topP: 1 },
      { temperature: 0.5, topP: 0.9 },
      { temperature: 1.7, topP: 0.6, topK: 5 },
    ]) {
      for (let i = 0; i < 200; i++) {
        const out = sampleToken(row, params, rng)
        expect(out.logprob).toBeCloseTo(reference[out.id] as number, 12)
        expect(out.sampledLogprob).toBeLessThanOrEqual(1e-12)
      }
    }
    // At T = 1 without truncation the two coincide.
    const plain = sampleToken(row, { temperature: 1, topP: 1 }, rng)
    expect(plain.sampledLogprob).toBeCloseTo(plain.logprob, 12)
  })

  it("sampledLogprob is the log-probability at the sampling temperature", () => {
    const raw = [2, 1, 0.5, -1, 0]
    const want = softmax(raw, 0.5).map(Math.log)
    const rng = new Rng(11)
    for (let i = 0; i < 50; i++) {
      const out = sampleToken(new Float64Array(raw), { temperature: 0.5, topP: 1 }, rng)
      expect(out.sampledLogprob).toBeCloseTo(want[out.id] as number, 12)
    }
  })

  it("is deterministic for a seed", () => {
    const rng = new Rng(5)
    const row = new Float32Array(100).map(() => rng.normal())
    const run = (seed: number) => {
      const r = new Rng(seed)
      return Array.from(
        { length: 200 },
        () => sampleToken(row, { temperature: 0.9, topP: 0.95 }, r).id,
      )
    }
    expect(run(42)).toEqual(run(42))
    expect(run(42)).not.toEqual(run(43))
  })

  it("never samples a -Infinity logit", () => {
    const row = new Float32Array([Number.NEGATIVE_INFINITY, 0, Number.NEGATIVE_INFINITY, 0])
    const f = frequencies(row, { temperature: 1.5, topP: 1 }, 2000)
    expect(f[0]).toBe(0)
    expect(f[2]).toBe(0)
    expect(
      sampleToken(row, { temperature: 1, topP: 1 }, new Draws([0.9999999999])).logprob,
    ).toBeCloseTo(Math.log(0.5), 12)
    expect(logSoftmax(row)[0]).toBe(Number.NEGATIVE_INFINITY)
  })

  it("a tiny temperature is (almost) greedy", () => {
    const row = new Float32Array([0, 1, 0.999])
    expect(frequencies(row, { temperature: 1e-6, topP: 1 }, 500)).toEqual([0, 1, 0])
  })

  it("refuses bad settings and bad logits", () => {
    const ok: SamplingParams = { temperature: 1, topP: 1 }
    const rng = new Rng(1)
    const bad = (params: SamplingParams, row: Float32Array | Float64Array = logits) =>
      messageOf(() => sampleToken(row, params, rng))
    expect(bad({ temperature: -0.5, topP: 1 })).toBe(
      "temperature: must be a finite number ≥ 0, got -0.5",
    )
    expect(bad({ temperature: Number.NaN, topP: 1 })).toBe(
      "temperature: must be a finite number ≥ 0, got NaN",
    )
    expect(bad({ temperature: 1, topP: 0 })).toBe("topP: must be in (0, 1], got 0")
    expect(bad({ temperature: 1, topP: 1.5 })).toBe("topP: must be in (0, 1], got 1.5")
    expect(bad({ temperature: 1, topP: Number.NaN })).toBe("topP: must be in (0, 1], got NaN")
    expect(bad({ temperature: 1, topP: 1, topK: 0 })).toBe(
      "topK: must be a positive integer, got 0",
    )
    expect(bad({ temperature: 1, topP: 1, topK: 2.5 })).toBe(
      "topK: must be a positive integer, got 2.5",
    )
    expect(bad(ok, new Float32Array([0, Number.NaN, 1]))).toBe("logits[1]: is NaN")
    expect(bad({ temperature: 0, topP: 1 }, new Float32Array([0, 1, Number.NaN]))).toBe(
      "logits[2]: is NaN",
    )
    expect(bad(ok, new Float32Array([0, Number.POSITIVE_INFINITY]))).toBe("logits[1]: is +Infinity")
    expect(bad(ok, new Float32Array([Number.NEGATIVE_INFINITY]))).toBe(
      "logits: every logit is -Infinity: no token can be sampled",
    )
    expect(bad(ok, new Float32Array(0))).toBe("logits: is empty")
    expect(messageOf(() => logSoftmax(new Float64Array([Number.NaN])))).toBe("logits[0]: is NaN")
  })
})
