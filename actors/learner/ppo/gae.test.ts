import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { PpoError } from "./errors.ts"
import { decoupledGae, gae, normalizeAdvantages } from "./gae.ts"

const close = (actual: ArrayLike<number>, expected: ReadonlyArray<number>, digits = 12) => {
  expect(actual.length).toBe(expected.length)
  for (const [i, e] of expected.entries()) expect(actual[i]).toBeCloseTo(e, digits)
}

/** Discounted reward-to-go Σ_{k ≥ r} γ^(k−r) r_k + γ^(n−r) lastValue, directly. */
const rewardToGo = (rewards: ReadonlyArray<number>, gamma: number, lastValue = 0): number[] =>
  rewards.map((_, r) => {
    let g = 0
    for (let k = rewards.length - 1; k >= r; k--) g = (rewards[k] as number) + gamma * g
    return g + gamma ** (rewards.length - r) * lastValue
  })

describe("gae", () => {
  it("matches a hand-computed trajectory with two observation rows in the middle", () => {
    // Rows 0, 1 and 4, 5 are actions; rows 2, 3 are observation tokens. The reward R = 4 sits on
    // the last generated token (row 5). γ = λ = 0.5, so γλ = 0.25; terminal (lastValue 0).
    //   V = [1, 2, 1, 0, 2, 1]
    //   δ5 = 4 + 0.5·0 − 1 = 3          A5 = 3
    //   δ4 = 0 + 0.5·1 − 2 = −1.5       A4 = −1.5 + 0.25·3        = −0.75
    //   δ3 = 0 + 0.5·2 − 0 = 1          A3 = 1 + 0.25·(−0.75)     = 0.8125
    //   δ2 = 0 + 0.5·0 − 1 = −1         A2 = −1 + 0.25·0.8125     = −0.796875
    //   δ1 = 0 + 0.5·1 − 2 = −1.5       A1 = −1.5 + 0.25·(−0.796875) = −1.69921875
    //   δ0 = 0 + 0.5·2 − 1 = 0          A0 = 0 + 0.25·(−1.69921875)  = −0.4248046875
    //   returns = A + V = [0.5751953125, 0.30078125, 0.203125, 0.8125, 1.25, 4]
    // The observation rows' values (1 and 0) enter the action rows' advantages (A1, A0).
    const { advantages, returns } = gae({
      rewards: [0, 0, 0, 0, 0, 4],
      values: [1, 2, 1, 0, 2, 1],
      gamma: 0.5,
      lambda: 0.5,
    })
    close(advantages, [-0.4248046875, -1.69921875, -0.796875, 0.8125, -0.75, 3], 15)
    close(returns, [0.5751953125, 0.30078125, 0.203125, 0.8125, 1.25, 4], 15)
  })

  it("with λ = 1 gives returns equal to the discounted reward-to-go, whatever the values", () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: -5, max: 5, noNaN: true }), { minLength: 1, maxLength: 20 }),
        fc.array(fc.double({ min: -5, max: 5, noNaN: true }), { minLength: 20, maxLength: 20 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: -3, max: 3, noNaN: true }),
        (rewards, vs, gamma, lastValue) => {
          const values = vs.slice(0, rewards.length)
          const { returns } = gae({ rewards, values, gamma, lambda: 1, lastValue })
          const expected = rewardToGo(rewards, gamma, lastValue)
          for (const [i, e] of expected.entries())
            expect(Math.abs((returns[i] as number) - e)).toBeLessThan(1e-9)
        },
      ),
      { numRuns: 100 },
    )
  })

  it("with γ = λ = 1 and the reward only at the end gives returns R at every row", () => {
    const { returns, advantages } = gae({
      rewards: [0, 0, 0, 0, 0, 0, 7],
      values: [0.3, -1, 2, 5, 0, 1, 6],
      gamma: 1,
      lambda: 1,
    })
    close(returns, [7, 7, 7, 7, 7, 7, 7])
    close(advantages, [6.7, 8, 5, 2, 7, 6, 1])
  })

  it("with λ = 0 gives the one-step TD errors, bootstrapping from lastValue", () => {
    const { advantages, returns } = gae({
      rewards: [1, 0, 2],
      values: [0.5, 1, 1.5],
      gamma: 0.9,
      lambda: 0,
      lastValue: 2,
    })
    // δ2 = 2 + 0.9·2 − 1.5 = 2.3, δ1 = 0 + 0.9·1.5 − 1 = 0.35, δ0 = 1 + 0.9·1 − 0.5 = 1.4
    close(advantages, [1.4, 0.35, 2.3])
    close(returns, [1.9, 1.35, 3.8])
  })

  it("handles an empty trajectory and rejects bad inputs", () => {
    expect(gae({ rewards: [], values: [], gamma: 1, lambda: 1 }).returns.length).toBe(0)
    expect(() => gae({ rewards: [1, 2], values: [1], gamma: 1, lambda: 1 })).toThrow(PpoError)
    expect(() => gae({ rewards: [1], values: [1], gamma: 1.5, lambda: 1 })).toThrow("gamma")
    expect(() => gae({ rewards: [1], values: [1], gamma: 1, lambda: -0.1 })).toThrow("lambda")
    expect(() => gae({ rewards: [Number.NaN], values: [1], gamma: 1, lambda: 1 })).toThrow(
      "rewards[0]",
    )
  })
})

describe("decoupledGae", () => {
  const rewards = [0, 0, 0, 0, 0, 4]
  const values = [1, 2, 1, 0, 2, 1]

  it("takes the advantages from the actor λ and the returns from the critic λ (default 1)", () => {
    const d = decoupledGae({ rewards, values, gamma: 0.5, actorLambda: 0.5 })
    close(d.advantages, Array.from(gae({ rewards, values, gamma: 0.5, lambda: 0.5 }).advantages))
    // λ = 1: the Monte-Carlo return 4 · 0.5^(5 − r).
    close(d.returns, [0.125, 0.25, 0.5, 1, 2, 4])
    const same = decoupledGae({ rewards, values, gamma: 0.5, actorLambda: 0.7, criticLambda: 0.7 })
    const plain = gae({ rewards, values, gamma: 0.5, lambda: 0.7 })
    close(same.returns, Array.from(plain.returns))
    close(same.advantages, Array.from(plain.advantages))
  })

  it("rejects a critic λ out of range", () => {
    expect(() =>
      decoupledGae({ rewards, values, gamma: 1, actorLambda: 0.9, criticLambda: 2 }),
    ).toThrow("criticLambda")
  })
})

describe("normalizeAdvantages", () => {
  it("whitens over the action rows only and leaves the other rows as they were", () => {
    // Action rows 1 and 3: mean 2, population std 1.
    const out = normalizeAdvantages([1, 100, 3, -50], [1, 0, 1, 0], 0)
    close(out, [-1, 100, 1, -50])
  })

  it("has mean 0 and std 1 over the action rows", () => {
    const adv = [0.3, -2, 5, 1, 1, 7, -0.5]
    const mask = new Uint8Array([1, 1, 0, 1, 1, 0, 1])
    const out = normalizeAdvantages(adv, mask)
    const picked = Array.from(out).filter((_, i) => mask[i] === 1)
    const m = picked.reduce((a, b) => a + b, 0) / picked.length
    const v = picked.reduce((a, b) => a + (b - m) ** 2, 0) / picked.length
    expect(m).toBeCloseTo(0, 12)
    expect(v).toBeCloseTo(1, 6)
  })

  it("copies the input when no row is an action, and maps a single action row to 0", () => {
    expect(Array.from(normalizeAdvantages([1, 2], [0, 0]))).toEqual([1, 2])
    expect(Array.from(normalizeAdvantages([5, 2], [1, 0]))).toEqual([0, 2])
    expect(() => normalizeAdvantages([1, 2], [1])).toThrow(PpoError)
  })
})
