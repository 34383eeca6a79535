import { describe, expect, it } from "vitest"
import { PpoError } from "./errors.ts"
import { leaveOneOutCentred, rewardPerTest, zeroVarianceMembers } from "./group.ts"

describe("rewardPerTest", () => {
  it("divides the passing tests by the task's tests, and keeps the reward when that is unknown", () => {
    expect(rewardPerTest(3, 4)).toBe(0.75)
    expect(rewardPerTest(4, 4)).toBe(1)
    expect(rewardPerTest(2, 0)).toBe(2)
    expect(rewardPerTest(2, undefined)).toBe(2)
    expect(() => rewardPerTest(Number.NaN, 4)).toThrow(PpoError)
  })
})

describe("leaveOneOutCentred", () => {
  it("subtracts the mean of the other members of the group (hand-computed)", () => {
    // Group g: 1, 0, 0.5 → 1 − (0 + 0.5)/2 = 0.75, 0 − (1 + 0.5)/2 = −0.75, 0.5 − (1 + 0)/2 = 0.
    // Group h: 2, 4 → −2, 2. "" and undefined: alone.
    const { centred, alone } = leaveOneOutCentred(
      [1, 0, 2, 0.5, 4, 7, 9],
      ["g", "g", "h", "g", "h", "", undefined],
    )
    expect(Array.from(centred)).toEqual([0.75, -0.75, -2, 0, 2, 0, 0])
    expect(Array.from(alone)).toEqual([0, 0, 0, 0, 0, 1, 1])
  })

  it("sums to zero within every group (the baseline removes the group's mean)", () => {
    const rewards = [0.2, 0.9, 0.4, 0.4, 0.1]
    const { centred } = leaveOneOutCentred(rewards, ["a", "a", "a", "b", "b"])
    expect((centred[0] as number) + (centred[1] as number) + (centred[2] as number)).toBeCloseTo(
      0,
      14,
    )
    expect((centred[3] as number) + (centred[4] as number)).toBeCloseTo(0, 14)
  })

  it("rejects mismatched lengths and non-finite rewards", () => {
    expect(() => leaveOneOutCentred([1, 2], ["a"])).toThrow("groups")
    expect(() => leaveOneOutCentred([1, Number.NaN], ["a", "a"])).toThrow("rewards[1]")
  })
})

describe("zeroVarianceMembers", () => {
  it("marks groups of two or more with equal rewards; never a trajectory alone", () => {
    const zero = zeroVarianceMembers([1, 1, 0, 1, 3, 3, 5], ["a", "a", "b", "b", "c", "", ""])
    // a: equal → both; b: 0 and 1 → no; c: alone → no; the two without a group are alone.
    expect(Array.from(zero)).toEqual([1, 1, 0, 0, 0, 0, 0])
  })
})
