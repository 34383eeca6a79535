import { describe, expect, it } from "vitest"
import { PpoError } from "./errors.ts"
import { trajectoryRows } from "./rows.ts"

describe("trajectoryRows", () => {
  it("shifts ids, mask and log-probs by one and puts the reward on the last generated token", () => {
    // Tokens: prompt 10 11, generated 20 21, observation 30, generated 22, template glue 31.
    const out = trajectoryRows({
      ids: [10, 11, 20, 21, 30, 22, 31],
      lossMask: [0, 0, 1, 1, 0, 1, 0],
      logprobs: [0, 0, -0.5, -0.25, 0, -1, 0],
      reward: 3,
      rewardScale: 0.5,
    })
    expect(Array.from(out.targets)).toEqual([11, 20, 21, 30, 22, 31])
    expect(Array.from(out.action)).toEqual([0, 1, 1, 0, 1, 0])
    expect(Array.from(out.behaviourLogprobs)).toEqual([0, -0.5, -0.25, 0, -1, 0])
    expect(Array.from(out.rewards)).toEqual([0, 0, 0, 0, 1.5, 0])
    expect(out.rewardRow).toBe(4)
  })

  it("gives no reward row when the policy generated nothing, and no rows for one token", () => {
    const out = trajectoryRows({
      ids: [1, 2, 3],
      lossMask: [1, 0, 0],
      logprobs: [0, 0, 0],
      reward: 5,
    })
    expect(out.rewardRow).toBe(-1)
    expect(Array.from(out.rewards)).toEqual([0, 0])
    expect(
      trajectoryRows({ ids: [7], lossMask: [0], logprobs: [0], reward: 1 }).targets.length,
    ).toBe(0)
  })

  it("rejects malformed trajectories", () => {
    expect(() => trajectoryRows({ ids: [], lossMask: [], logprobs: [], reward: 0 })).toThrow(
      PpoError,
    )
    expect(() =>
      trajectoryRows({ ids: [1, 2], lossMask: [0], logprobs: [0, 0], reward: 0 }),
    ).toThrow("lossMask")
    expect(() =>
      trajectoryRows({ ids: [1, 2], lossMask: [0, 2], logprobs: [0, 0], reward: 0 }),
    ).toThrow("lossMask[1]")
    expect(() =>
      trajectoryRows({ ids: [1, -2], lossMask: [0, 1], logprobs: [0, 0], reward: 0 }),
    ).toThrow("ids[1]")
  })
})
