import { describe, expect, it } from "vitest"
import { RlTimeBudget } from "./time-budget.ts"

describe("RL time budget", () => {
  it("fits one more update while it and the reserve end by the deadline", () => {
    // Deadline at 100 s, 20 s kept for the evaluations after RL.
    const b = new RlTimeBudget(100_000, 20_000, 0)
    b.stepEnded(10_000)
    b.stepEnded(20_000)
    expect(b.nextStepMs).toBe(10_000)
    expect(b.fits(20_000)).toBe(true)
    expect(b.fits(70_000)).toBe(true)
    expect(b.fits(70_001)).toBe(false)
  })

  it("takes the next update to be as long as the longest of the last five", () => {
    const b = new RlTimeBudget(1_000_000, 0, 0)
    // Durations 30, 10, 10, 10, 10 s: the 30 s update is within the last five.
    for (const end of [30_000, 40_000, 50_000, 60_000, 70_000]) b.stepEnded(end)
    expect(b.nextStepMs).toBe(30_000)
    // A sixth update of 10 s pushes it out of the window.
    b.stepEnded(80_000)
    expect(b.nextStepMs).toBe(10_000)
    // And a slower one counts at once.
    b.stepEnded(100_000)
    expect(b.nextStepMs).toBe(20_000)
  })

  it("refuses when the reserve alone passes the deadline", () => {
    const b = new RlTimeBudget(60_000, 90_000, 0)
    expect(b.fits(0)).toBe(false)
  })
})
