import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { balancedEnd, type JsonValue, lineColumn, MAX_JSON_DEPTH, readJson } from "./json.ts"

/** A JsonValue as plain JS (objects as records), to compare with JSON.parse. */
const plain = (v: JsonValue): unknown => {
  if (v instanceof Map) {
    const out: Record<string, unknown> = {}
    for (const [k, x] of v) Object.defineProperty(out, k, { value: plain(x), enumerable: true })
    return out
  }
  if (Array.isArray(v)) return v.map(plain)
  return v
}

describe("readJson", () => {
  it("reads a value from an offset and says where it ends", () => {
    const text = 'prose {"a": [1, 2.5e3, -0.5, true, false, null, "x\\n"]} more'
    const r = readJson(text, 6)
    expect(r.ok).toBe(true)
    if (r.ok) {
      expect(plain(r.value)).toEqual({ a: [1, 2500, -0.5, true, false, null, "x\n"] })
      expect(text.slice(r.end)).toBe(" more")
    }
  })

  it("reports duplicate keys by path", () => {
    const r = readJson('{"a": {"b": 1, "b": 2}, "a": 3}')
    expect(r.ok && r.duplicateKeys).toEqual(["a.b", "a"])
  })

  it("reports errors with their offset", () => {
    expect(readJson('{"a" 1}')).toEqual({
      ok: false,
      offset: 5,
      message: 'expected \':\' after the key "a", found "1"',
    })
    expect(readJson("[1,]")).toMatchObject({
      ok: false,
      offset: 3,
      message: "trailing comma before ']'",
    })
    expect(readJson('"abc')).toMatchObject({ ok: false, offset: 0 })
    expect(readJson("")).toMatchObject({ ok: false, message: expect.stringContaining("cut short") })
    expect(readJson("nul")).toMatchObject({ ok: false, message: 'expected a value, found "n"' })
  })

  it("limits nesting", () => {
    expect(readJson("[".repeat(MAX_JSON_DEPTH) + "]".repeat(MAX_JSON_DEPTH)).ok).toBe(true)
    expect(readJson("[".repeat(MAX_JSON_DEPTH + 1))).toMatchObject({
      ok: false,
      message: "the JSON is nested too deeply",
    })
  })

  it("agrees with JSON.parse on generated JSON", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.boolean(), (value, pretty) => {
        const text = JSON.stringify(value, null, pretty ? 2 : undefined)
        const r = readJson(text)
        expect(r.ok).toBe(true)
        if (r.ok) {
          expect(r.end).toBe(text.length)
          expect(plain(r.value)).toEqual(JSON.parse(text))
        }
      }),
      { numRuns: 300 },
    )
  })

  it("never throws and accepts what JSON.parse accepts", () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        const r = readJson(text)
        let valid = true
        try {
          JSON.parse(text)
        } catch {
          valid = false
        }
        if (valid) expect(r.ok && text.slice(r.end).trim()).toBe("")
      }),
      { numRuns: 500 },
    )
  })
})

describe("helpers", () => {
  it("lineColumn is 1-based", () => {
    expect(lineColumn("ab\ncd", 0)).toEqual({ line: 1, column: 1 })
    expect(lineColumn("ab\ncd", 4)).toEqual({ line: 2, column: 2 })
  })

  it("balancedEnd skips strings and fails on unclosed objects", () => {
    expect(balancedEnd('x {"a": "}{", "b": [{}]} y', 2)).toBe(24)
    expect(balancedEnd('{"a": "\\"}"', 0)).toBeUndefined()
    expect(balancedEnd("{", 0)).toBeUndefined()
  })
})
