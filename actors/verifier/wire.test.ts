import { fromBinary } from "@bufbuild/protobuf"
import { describe, expect, it } from "vitest"
import { ErrorCode, TestOutcome, VerifierPath, VerifierResultSchema } from "../../proto/index.ts"
import type { VerifierOutcome } from "./outcome.ts"
import { encodeResultWithin, resultFromOutcome, unverifiableMessage } from "./wire.ts"

const scored: VerifierOutcome = {
  kind: "scored",
  missing: [],
  forgery: [],
  guarded: true,
  path: "rewritten-script",
  pathReason: "the script fetches pytest with uvx and the sandbox has no network",
  tests: [
    { name: "test_outputs.py::test_a", outcome: "passed", durationMs: 12.4, message: "" },
    { name: "test_outputs.py::test_b", outcome: "failed", durationMs: 3, message: "assert 1 == 2" },
  ],
  passed: 1,
  total: 2,
  reward: 1,
  resolved: false,
  timedOut: false,
  mode: "pytest",
  notes: ["the reward file was ignored: pytest's report is complete"],
  durationMs: 1500,
  exitCode: 1,
  outputTail: new TextEncoder().encode("1 failed, 1 passed"),
}

const unverifiable: VerifierOutcome = {
  ...scored,
  kind: "unverifiable",
  missing: ["numpy", "requests"],
  path: "script",
  pathReason: "the script runs its own test command",
  tests: [],
  passed: 0,
  total: 0,
  reward: 0,
  resolved: false,
  notes: ["uvx -w numpy -w requests: not installed in the sandbox, and it has no network"],
}

describe("resultFromOutcome", () => {
  it("says when the tests ran with the sandbox's own programs", () => {
    expect(resultFromOutcome(scored).unguarded).toBe(false)
    expect(resultFromOutcome({ ...scored, guarded: false }).unguarded).toBe(true)
  })

  it("carries a scored outcome's counts, tests, path and notes", () => {
    const r = resultFromOutcome(scored)
    expect({
      passed: r.passed,
      total: r.total,
      reward: r.reward,
      resolved: r.resolved,
      infraFailed: r.infraFailed,
      unverifiable: r.unverifiable,
      missing: r.missingPackages,
      path: r.path,
      pathReason: r.pathReason,
      notes: r.notes,
      durationMs: r.durationMs,
      error: r.error,
    }).toEqual({
      passed: 1,
      total: 2,
      reward: 1,
      resolved: false,
      infraFailed: false,
      unverifiable: false,
      missing: [],
      path: VerifierPath.REWRITTEN_SCRIPT,
      pathReason: scored.pathReason,
      notes: scored.notes,
      durationMs: 1500,
      error: undefined,
    })
    expect(r.tests.map((t) => [t.name, t.outcome, t.durationMs])).toEqual([
      ["test_outputs.py::test_a", TestOutcome.PASSED, 12],
      ["test_outputs.py::test_b", TestOutcome.FAILED, 3],
    ])
  })

  it("turns an unverifiable outcome into no score: unverifiable, the packages, never infra_failed", () => {
    // Even if the verifier had parsed something, an unverifiable result carries no score.
    const r = resultFromOutcome({ ...unverifiable, tests: scored.tests, passed: 1, reward: 1 })
    expect({
      unverifiable: r.unverifiable,
      infraFailed: r.infraFailed,
      reward: r.reward,
      passed: r.passed,
      total: r.total,
      resolved: r.resolved,
      tests: r.tests,
      missing: r.missingPackages,
      path: r.path,
      pathReason: r.pathReason,
      notes: r.notes,
    }).toEqual({
      unverifiable: true,
      infraFailed: false,
      reward: 0,
      passed: 0,
      total: 0,
      resolved: false,
      tests: [],
      missing: ["numpy", "requests"],
      path: VerifierPath.SCRIPT,
      pathReason: "the script runs its own test command",
      notes: unverifiable.notes,
    })
    expect(r.error?.code).toBe(ErrorCode.FAILED_PRECONDITION)
    expect(r.error?.retryable).toBe(false)
    expect(r.error?.message).toBe("the tests need packages the sandbox lacks: numpy, requests")
    expect(unverifiableMessage([])).toBe("the tests need packages the sandbox lacks")
  })

  it("turns a forged outcome into a score of 0 with its tests and evidence, never infra_failed", () => {
    const evidence = [
      "canary test_layout_3fa9c1.py::test_rows_0b12aa must fail but passed in pytest's report report.xml",
    ]
    // Even counts left above 0 do not reach the wire.
    const r = resultFromOutcome({ ...scored, kind: "forged", forgery: evidence })
    expect({
      forged: r.forged,
      evidence: r.forgeryEvidence,
      infraFailed: r.infraFailed,
      unverifiable: r.unverifiable,
      reward: r.reward,
      passed: r.passed,
      total: r.total,
      resolved: r.resolved,
      tests: r.tests.map((t) => t.name),
      error: r.error,
    }).toEqual({
      forged: true,
      evidence,
      infraFailed: false,
      unverifiable: false,
      reward: 0,
      passed: 0,
      total: 2,
      resolved: false,
      tests: ["test_outputs.py::test_a", "test_outputs.py::test_b"],
      error: undefined,
    })
    const decoded = fromBinary(VerifierResultSchema, encodeResultWithin(r, 64 * 1024))
    expect([decoded.forged, decoded.forgeryEvidence]).toEqual([true, evidence])
    expect(resultFromOutcome(scored).forged).toBe(false)
    expect(resultFromOutcome(scored).forgeryEvidence).toEqual([])
  })

  it("round-trips through the wire within max_payload, notes and packages kept", () => {
    const r = resultFromOutcome(unverifiable)
    const decoded = fromBinary(VerifierResultSchema, encodeResultWithin(r, 1024 * 1024))
    expect(decoded.unverifiable).toBe(true)
    expect(decoded.missingPackages).toEqual(["numpy", "requests"])
    expect(decoded.notes).toEqual(unverifiable.notes)
    expect(decoded.path).toBe(VerifierPath.SCRIPT)
  })

  it("bounds the notes and packages it carries, and shortens notes before dropping the output", () => {
    const long = "n".repeat(10_000)
    const r = resultFromOutcome({
      ...unverifiable,
      missing: Array.from({ length: 100 }, (_, i) => `pkg${i}`),
      notes: Array.from({ length: 50 }, () => long),
      outputTail: new Uint8Array(64 * 1024),
    })
    expect(r.missingPackages).toHaveLength(64)
    expect(r.notes).toHaveLength(32)
    expect(r.notes[0]?.length).toBe(4096)
    const bytes = encodeResultWithin(r, 64 * 1024)
    expect(bytes.byteLength).toBeLessThanOrEqual(64 * 1024)
    const decoded = fromBinary(VerifierResultSchema, bytes)
    expect(decoded.notes).toHaveLength(32)
    expect(decoded.notes.every((n) => n.length >= 256)).toBe(true)
    expect(decoded.missingPackages).toHaveLength(64)
  })
})
