import { describe, expect, it } from "vitest"
import { SamplingError } from "./errors.ts"
import { checkStop, type StopCriteria } from "./stop.ts"

describe("checkStop", () => {
  const criteria: StopCriteria = {
    stopTokenIds: new Set([0, 2]),
    stopSequences: [
      [7, 8, 9],
      [5, 5],
    ],
    maxTokens: 6,
  }

  it("continues while nothing matches", () => {
    expect(checkStop([], criteria)).toBeUndefined()
    expect(checkStop([1, 7, 8], criteria)).toBeUndefined()
    expect(checkStop([0, 1], criteria)).toBeUndefined() // a stop token earlier does not count
    expect(checkStop([5, 1, 5], criteria)).toBeUndefined()
  })

  it("stops on a stop token as the last token", () => {
    expect(checkStop([1, 2], criteria)).toBe("stop_token")
    expect(checkStop([0], criteria)).toBe("stop_token")
  })

  it("stops when the output ends with a stop sequence", () => {
    expect(checkStop([1, 7, 8, 9], criteria)).toBe("stop_sequence")
    expect(checkStop([5, 5], criteria)).toBe("stop_sequence")
    expect(checkStop([9], criteria)).toBeUndefined()
  })

  it("stops at maxTokens", () => {
    expect(checkStop([1, 1, 1, 1, 1], criteria)).toBeUndefined()
    expect(checkStop([1, 1, 1, 1, 1, 1], criteria)).toBe("max_tokens")
    expect(checkStop([], { stopTokenIds: new Set(), maxTokens: 0 })).toBe("max_tokens")
  })

  it("prefers the model's own stop over the length limit on the same token", () => {
    expect(checkStop([1, 1, 1, 1, 1, 2], criteria)).toBe("stop_token")
    expect(checkStop([1, 1, 1, 7, 8, 9], criteria)).toBe("stop_sequence")
  })

  it("refuses an empty stop sequence and a bad maxTokens", () => {
    expect(() =>
      checkStop([1], { stopTokenIds: new Set(), stopSequences: [[]], maxTokens: 3 }),
    ).toThrow(
      new SamplingError({
        field: "stopSequences[0]",
        reason: "is empty (it would stop before any token)",
      }),
    )
    expect(() => checkStop([1], { stopTokenIds: new Set(), maxTokens: -1 })).toThrow(
      "maxTokens: must be a non-negative integer, got -1",
    )
  })
})
