import { describe, expect, it } from "vitest"
import { batchAdvantages } from "./advantages.ts"

const close = (actual: ArrayLike<number> | undefined, expected: ReadonlyArray<number>, d = 12) => {
  expect(actual?.length).toBe(expected.length)
  for (const [i, e] of expected.entries()) expect(actual?.[i]).toBeCloseTo(e, d)
}

const options = {
  mode: "critic" as const,
  gamma: 1,
  actorLambda: 0.5,
  criticLambda: 1,
  normalize: false,
}

/** A trajectory of `rows` rows whose last row is its only generated token. */
const oneAction = (reward: number, values: number[], groupId?: string, weight?: number) => {
  const n = values.length
  const rewards = new Array<number>(n).fill(0)
  rewards[n - 1] = reward
  return {
    rewards,
    rewardRow: n - 1,
    action: Array.from({ length: n }, (_, r) => (r === n - 1 ? 1 : 0)),
    values,
    reward,
    ...(groupId === undefined ? {} : { groupId }),
    ...(weight === undefined ? {} : { weight }),
  }
}

describe("batchAdvantages", () => {
  it("critic: GAE with the actor λ, returns with the critic λ (hand-computed)", () => {
    // Rows 1 and 2 generated, R = 1 on row 2, V = [0.5, 0.2, 0.4], γ = 1, λ_actor = 0.5:
    //   δ2 = 1 − 0.4 = 0.6            A2 = 0.6
    //   δ1 = 0.4 − 0.2 = 0.2          A1 = 0.2 + 0.5 · 0.6 = 0.5
    //   δ0 = 0.2 − 0.5 = −0.3         A0 = −0.3 + 0.5 · 0.5 = −0.05
    // λ_critic = 1: returns = R at every row. Mean over generated rows 0.55, std 0.05.
    const out = batchAdvantages(
      [{ rewards: [0, 0, 1], rewardRow: 2, action: [0, 1, 1], values: [0.5, 0.2, 0.4], reward: 1 }],
      options,
    )
    close(out.advantages[0], [-0.05, 0.5, 0.6])
    close(out.returns[0], [1, 1, 1])
    expect(out.mean).toBeCloseTo(0.55, 12)
    expect(out.std).toBeCloseTo(0.05, 12)
    // λ_critic = 0.5: returns = A(λ = 0.5) + V.
    const half = batchAdvantages(
      [{ rewards: [0, 0, 1], rewardRow: 2, action: [0, 1, 1], values: [0.5, 0.2, 0.4], reward: 1 }],
      { ...options, criticLambda: 0.5 },
    )
    close(half.returns[0], [0.45, 0.7, 1])
  })

  it("group: the leave-one-out centred reward on every row, whitened, times the weight", () => {
    // Group g: 1, 0, 0.5 → c = 0.75, −0.75, 0; h alone → 0. Generated-token advantages
    // [0.75, −0.75, 0, 0]: mean 0, std √(2 · 0.5625 / 4) = 0.530330085890.
    const items = [
      oneAction(1, [9, 9], "g"),
      oneAction(0, [9, 9], "g", 0.5),
      oneAction(0.5, [9, 9], "g"),
      oneAction(1, [9, 9], "h"),
    ]
    const raw = batchAdvantages(items, { ...options, mode: "group" })
    close(raw.advantages[0], [0.75, 0.75])
    // Weight ½ halves it.
    close(raw.advantages[1], [-0.375, -0.375])
    close(raw.advantages[3], [0, 0])
    expect(Array.from(raw.alone)).toEqual([0, 0, 0, 1])
    expect(raw.mean).toBeCloseTo(0, 14)
    expect(raw.std).toBeCloseTo(0.53033008589, 10)
    // The critic's targets stay the raw rewards (γ = λ = 1: R on every row).
    close(raw.returns[0], [1, 1])
    const whitened = batchAdvantages(items, { ...options, mode: "group", normalize: true })
    const s = 0.75 / 0.53033008589
    // The generated row is whitened (ε = 1e-8 in the std); the other row (no policy loss) is
    // left as it was.
    close(whitened.advantages[0], [0.75, s], 6)
    close(whitened.advantages[1], [-0.375, -s / 2], 6)
    close(whitened.advantages[2], [0, 0], 6)
  })

  it("group+critic: GAE with the critic on the centred reward", () => {
    // Rewards 1 and 0 in one group → c = 1, −1; one generated row each, V = 0.3 and 0.1:
    // A = c − V = 0.7 and −1.1; returns (λ = 1) = c.
    const out = batchAdvantages([oneAction(1, [0.3], "g"), oneAction(0, [0.1], "g")], {
      ...options,
      mode: "group+critic",
    })
    close(out.advantages[0], [0.7])
    close(out.advantages[1], [-1.1])
    close(out.returns[0], [1])
    close(out.returns[1], [-1])
  })

  it("whitens over the whole batch's generated tokens to mean 0 and std 1", () => {
    const out = batchAdvantages(
      [oneAction(1, [0.2, 0.1]), oneAction(0, [0.3, 0.4]), oneAction(0.5, [0.1, 0.9])],
      { ...options, normalize: true },
    )
    const picked = out.advantages.map((a) => a[1] as number)
    const m = picked.reduce((a, b) => a + b, 0) / 3
    const v = picked.reduce((a, b) => a + (b - m) ** 2, 0) / 3
    expect(m).toBeCloseTo(0, 12)
    expect(v).toBeCloseTo(1, 6)
  })

  it("center false: scales by the std and keeps the mean, so a group's signs survive lengths", () => {
    // Group g: a success of 1 generated token and a failure of 3. RLOO: c = +1 and −1. Over the
    // 4 generated tokens the mean is (1 − 3)/4 = −0.5 and the std √(1 − 0.25) = 0.866.
    const long = {
      rewards: [0, 0, 0, 0],
      rewardRow: 3,
      action: [0, 1, 1, 1],
      values: [0, 0, 0, 0],
      reward: 0,
      groupId: "g",
    }
    const items = [oneAction(1, [0, 0], "g"), long]
    const std = Math.sqrt(0.75)
    const centred = batchAdvantages(items, { ...options, mode: "group", normalize: true })
    // Centred, the failure's tokens become (−1 + 0.5)/0.866 = −0.577: a third of the push the
    // success gets (+1.732).
    close(centred.advantages[0], [1, 1.5 / std], 6)
    close(centred.advantages[1], [-1, -0.5 / std, -0.5 / std, -0.5 / std], 6)
    const scaled = batchAdvantages(items, {
      ...options,
      mode: "group",
      normalize: true,
      center: false,
    })
    close(scaled.advantages[0], [1, 1 / std], 6)
    close(scaled.advantages[1], [-1, -1 / std, -1 / std, -1 / std], 6)
  })
})
