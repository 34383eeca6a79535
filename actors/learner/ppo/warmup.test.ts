import { describe, expect, it } from "vitest"
import { PpoError } from "./errors.ts"
import { policyWeightFor, trainPhase } from "./warmup.ts"

describe("trainPhase", () => {
  it("switches from SFT to critic warm-up to PPO at the configured steps", () => {
    const schedule = { sftSteps: 3, criticWarmupSteps: 2 }
    expect([0, 1, 2, 3, 4, 5, 6, 1000].map((s) => trainPhase(s, schedule))).toEqual([
      "sft",
      "sft",
      "sft",
      "critic_warmup",
      "critic_warmup",
      "ppo",
      "ppo",
      "ppo",
    ])
  })

  it("skips the phases with zero steps", () => {
    expect(trainPhase(0, { sftSteps: 0, criticWarmupSteps: 2 })).toBe("critic_warmup")
    expect(trainPhase(2, { sftSteps: 0, criticWarmupSteps: 2 })).toBe("ppo")
    expect(trainPhase(0, { sftSteps: 2, criticWarmupSteps: 0 })).toBe("sft")
    expect(trainPhase(2, { sftSteps: 2, criticWarmupSteps: 0 })).toBe("ppo")
    expect(trainPhase(0, { sftSteps: 0, criticWarmupSteps: 0 })).toBe("ppo")
  })

  it("rejects negative or fractional steps", () => {
    expect(() => trainPhase(-1, { sftSteps: 0, criticWarmupSteps: 0 })).toThrow(PpoError)
    expect(() => trainPhase(0.5, { sftSteps: 0, criticWarmupSteps: 0 })).toThrow("step")
    expect(() => trainPhase(0, { sftSteps: -2, criticWarmupSteps: 0 })).toThrow("sftSteps")
  })
})

describe("policyWeightFor", () => {
  it("is 1 in PPO and 0 otherwise", () => {
    expect(policyWeightFor("ppo")).toBe(1)
    expect(policyWeightFor("critic_warmup")).toBe(0)
    expect(policyWeightFor("sft")).toBe(0)
  })
})
