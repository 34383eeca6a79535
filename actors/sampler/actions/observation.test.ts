import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  formatObservation,
  MIN_OBSERVATION_BYTES,
  malformedObservation,
  omittedMarker,
  prependWarnings,
  TIMED_OUT_STATUS,
} from "./observation.ts"

const bytes = (s: string) => new TextEncoder().encode(s)
const text = (b: Uint8Array) => new TextDecoder().decode(b)

describe("formatObservation", () => {
  it("appends the exit code on its own line", () => {
    const o = formatObservation(
      { output: bytes("hello\n"), exitCode: 0, timedOut: false },
      { maxBytes: 1000 },
    )
    expect(text(o.bytes)).toBe("hello\n[exit code 0]\n")
    expect(o.truncated).toBe(false)
  })

  it("adds a newline before the status when the output lacks one", () => {
    const o = formatObservation(
      { output: bytes("no newline"), exitCode: 2, timedOut: false },
      { maxBytes: 1000 },
    )
    expect(text(o.bytes)).toBe("no newline\n[exit code 2]\n")
  })

  it("an empty output is just the status", () => {
    const o = formatObservation(
      { output: new Uint8Array(0), exitCode: 1, timedOut: false },
      { maxBytes: 1000 },
    )
    expect(text(o.bytes)).toBe("[exit code 1]\n")
  })

  it("says when the command timed out, whatever the exit code", () => {
    const o = formatObservation(
      { output: bytes("working...\n"), exitCode: 130, timedOut: true },
      { maxBytes: 1000 },
    )
    expect(text(o.bytes)).toBe(`working...\n${TIMED_OUT_STATUS}\n`)
    expect(TIMED_OUT_STATUS).toBe("[timed out after the command's limit; interrupted with Ctrl-C]")
  })

  it("has no status line when the exit code is unknown", () => {
    const o = formatObservation(
      { output: bytes("$ partial"), exitCode: undefined, timedOut: false },
      { maxBytes: 1000 },
    )
    expect(text(o.bytes)).toBe("$ partial")
    expect(o.truncated).toBe(false)
  })

  it("mentions bytes dropped before it and reports truncation", () => {
    const o = formatObservation(
      { output: bytes("head\n[...]\ntail\n"), exitCode: 0, timedOut: false, truncatedBytes: 5000 },
      { maxBytes: 1000 },
    )
    expect(text(o.bytes)).toBe(
      "head\n[...]\ntail\n[output truncated: 5000 bytes omitted]\n[exit code 0]\n",
    )
    expect(o.truncated).toBe(true)
  })

  it("keeps the head and the tail around a marker when over budget", () => {
    const output = bytes(`${"a".repeat(600)}${"b".repeat(600)}`)
    const o = formatObservation({ output, exitCode: 0, timedOut: false }, { maxBytes: 300 })
    const out = text(o.bytes)
    expect(o.truncated).toBe(true)
    expect(o.bytes.length).toBeLessThanOrEqual(300)
    const status = "\n[exit code 0]\n"
    expect(out.endsWith(status)).toBe(true)
    const m = /^(a+)\n\[\.\.\. (\d+) bytes omitted \.\.\.\]\n(b+)\n\[exit code 0\]\n$/.exec(out)
    expect(m).not.toBeNull()
    const [, head = "", omitted = "", tail = ""] = m ?? []
    expect(head.length + Number(omitted) + tail.length).toBe(1200)
    expect(Math.abs(head.length - tail.length)).toBeLessThanOrEqual(1)
    // The budget is used: at most a few bytes short (the marker was sized for the worst case).
    expect(o.bytes.length).toBeGreaterThan(295)
  })

  it("cuts raw bytes, invalid UTF-8 included, without decoding them", () => {
    const output = new Uint8Array(2000)
    for (let k = 0; k < output.length; k++) output[k] = (k * 37 + 0x80) & 0xff
    const o = formatObservation({ output, exitCode: 3, timedOut: false }, { maxBytes: 512 })
    expect(o.bytes.length).toBeLessThanOrEqual(512)
    expect(o.bytes[0]).toBe(output[0])
    const statusLength = bytes("\n[exit code 3]\n").length
    expect(o.bytes[o.bytes.length - statusLength - 1]).toBe(output[output.length - 1])
  })

  it("treats a budget below the minimum as the minimum", () => {
    const o = formatObservation(
      { output: bytes("x".repeat(5000)), exitCode: 0, timedOut: true },
      { maxBytes: 10 },
    )
    expect(o.bytes.length).toBeLessThanOrEqual(MIN_OBSERVATION_BYTES)
    expect(text(o.bytes).startsWith("x")).toBe(true)
    expect(text(o.bytes)).toContain("bytes omitted")
  })

  it("is exact at the boundary", () => {
    const status = "[exit code 0]\n"
    const fits = bytes(`${"y".repeat(300 - status.length - 1)}\n`)
    const o = formatObservation({ output: fits, exitCode: 0, timedOut: false }, { maxBytes: 300 })
    expect(o.bytes.length).toBe(300)
    expect(o.truncated).toBe(false)
    const over = bytes(`${"y".repeat(300 - status.length)}\n`)
    const p = formatObservation({ output: over, exitCode: 0, timedOut: false }, { maxBytes: 300 })
    expect(p.truncated).toBe(true)
    expect(p.bytes.length).toBeLessThanOrEqual(300)
  })

  it("the marker reads as documented", () => {
    expect(omittedMarker(1234)).toBe("\n[... 1234 bytes omitted ...]\n")
  })
})

describe("formatObservation properties", () => {
  const outcome = fc.record({
    output: fc.uint8Array({ maxLength: 3000 }),
    exitCode: fc.option(fc.integer({ min: -1, max: 255 }), { nil: undefined }),
    timedOut: fc.boolean(),
    truncatedBytes: fc.option(fc.nat({ max: 10_000_000 }), { nil: undefined }),
  })
  const budget = fc.integer({ min: MIN_OBSERVATION_BYTES, max: 4000 })

  it("never exceeds maxBytes and keeps the output's first and last bytes", () => {
    fc.assert(
      fc.property(outcome, budget, (o, maxBytes) => {
        const { bytes: out, truncated } = formatObservation(o, { maxBytes })
        expect(out.length).toBeLessThanOrEqual(maxBytes)
        if (o.output.length === 0) return
        expect(out[0]).toBe(o.output[0])
        // The status block is the text after the output (and its separator).
        const plain = formatObservation({ ...o, output: new Uint8Array(0) }, { maxBytes }).bytes
        const last = out.length - plain.length - 1
        const endsWithNewline = o.output[o.output.length - 1] === 0x0a
        const at = plain.length > 0 && !endsWithNewline ? last - 1 : last
        expect(out[at]).toBe(o.output[o.output.length - 1])
        if (!truncated) expect(out.subarray(0, o.output.length)).toEqual(o.output)
        expect(truncated).toBe(
          (o.truncatedBytes ?? 0) > 0 || out.length < o.output.length + plain.length,
        )
      }),
      { numRuns: 500 },
    )
  })
})

describe("malformedObservation and warnings", () => {
  it("encodes the feedback with a final newline", () => {
    expect(text(malformedObservation("No command found."))).toBe("No command found.\n")
    expect(text(malformedObservation("ok\n"))).toBe("ok\n")
    expect(text(malformedObservation("é"))).toBe("é\n")
  })

  it("prepends warnings to an observation", () => {
    const obs = bytes("out\n[exit code 0]\n")
    expect(prependWarnings(obs, undefined)).toBe(obs)
    expect(prependWarnings(obs, [])).toBe(obs)
    expect(text(prependWarnings(obs, ["extra text after the JSON object was ignored"]))).toBe(
      "Warnings about your previous reply:\n- extra text after the JSON object was ignored\n\nout\n[exit code 0]\n",
    )
  })
})
