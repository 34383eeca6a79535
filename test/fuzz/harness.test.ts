import { Data, Effect } from "effect"
import { describe, expect, it } from "vitest"
import { ACCEPTED, type FuzzTarget, judge, judgeEffect, REJECTED, runTarget } from "./harness.ts"

class Refused extends Data.TaggedError("Refused")<{ readonly why: string }> {
  override get message(): string {
    return `refused: ${this.why}`
  }
}
class Silent extends Data.TaggedError("Silent")<{ readonly why: string }> {}

describe("fuzz harness verdicts", () => {
  it("a typed error with a message is a rejection; raw exceptions, defects and silent errors are crashes", () => {
    expect(judge(() => ACCEPTED)).toEqual(ACCEPTED)
    expect(
      judge(() => {
        throw new Refused({ why: "x" })
      }),
    ).toEqual(REJECTED)
    expect(
      judge(() => {
        throw new RangeError("premature EOF")
      }).kind,
    ).toBe("crash")
    expect(
      judge(() => {
        throw "a string"
      }).kind,
    ).toBe("crash")
    expect(
      judge(() => {
        throw new Silent({ why: "no message" })
      }).kind,
    ).toBe("crash")
    expect(judgeEffect(Effect.fail(new Refused({ why: "x" })))).toEqual(REJECTED)
    expect(judgeEffect(Effect.fail(new Error("untyped"))).kind).toBe("crash")
    expect(judgeEffect(Effect.sync(() => JSON.parse("{"))).kind).toBe("crash")
  })

  it("counts outcomes, reports crashes with their input, and turns a case that never settles into a hang", async () => {
    const target: FuzzTarget = {
      name: "sample",
      description: "every third case crashes, the tenth never settles",
      make: (rng) => {
        const n = rng.int(3)
        return {
          input: () => `n=${n}`,
          run: () =>
            n === 0
              ? judge(() => {
                  throw new TypeError("boom")
                })
              : n === 1
                ? REJECTED
                : ACCEPTED,
        }
      },
    }
    const report = await runTarget(target, { iterations: 30, seed: 7, maxExamples: 100 })
    expect(report.accepted + report.rejected + report.crashes).toBe(30)
    expect(report.crashes).toBeGreaterThan(0)
    expect(report.examples[0]?.input).toBe("n=0")
    expect(report.examples[0]?.reason).toMatch(/untyped exception: TypeError: boom/)
    const again = await runTarget(target, { iterations: 30, seed: 7 })
    expect([again.accepted, again.rejected, again.crashes]).toEqual([
      report.accepted,
      report.rejected,
      report.crashes,
    ])

    const stuck: FuzzTarget = {
      name: "stuck",
      description: "never settles",
      make: () => ({ input: () => "", run: () => new Promise(() => {}) }),
    }
    const hung = await runTarget(stuck, { iterations: 1, seed: 1, caseTimeoutMs: 50 })
    expect(hung.examples[0]?.reason).toMatch(/^hang/)
  })
})
