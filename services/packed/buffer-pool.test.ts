import { describe, expect, it } from "vitest"
import { BufferPool } from "./buffer-pool.ts"
import { spliceBytesFields } from "./splice.ts"

describe("BufferPool", () => {
  it("lends a given-back buffer again when it is large enough, else allocates", () => {
    const pool = new BufferPool(1 << 20)
    const a = pool.take(100)
    expect(a.length).toBe(100)
    pool.give(a)
    expect(pool.held).toBe(100)
    expect(pool.take(50)).toBe(a)
    expect(pool.held).toBe(0)
    pool.give(a)
    const b = pool.take(200)
    expect(b).not.toBe(a)
    expect(b.length).toBe(200)
    expect(pool.held).toBe(100)
  })

  it("keeps at most its byte limit for reuse", () => {
    const pool = new BufferPool(250)
    for (let i = 0; i < 4; i++) pool.give(new Uint8Array(100))
    expect(pool.held).toBe(200)
  })
})

describe("spliceBytesFields with parts and a target buffer", () => {
  it("writes a field given as parts as their concatenation, into the target when it fits", () => {
    const whole = spliceBytesFields(new Uint8Array([8, 1]), [[2, Uint8Array.from([1, 2, 3, 4])]])
    const parts = spliceBytesFields(new Uint8Array([8, 1]), [
      [2, [Uint8Array.from([1, 2]), new Uint8Array(0), Uint8Array.from([3, 4])]],
    ])
    expect(parts).toEqual(whole)
    const target = new Uint8Array(64).fill(9)
    const into = spliceBytesFields(
      new Uint8Array([8, 1]),
      [[2, Uint8Array.from([1, 2, 3, 4])]],
      undefined,
      target,
    )
    expect(into).toEqual(whole)
    expect(into.buffer).toBe(target.buffer)
    const small = new Uint8Array(2)
    const fresh = spliceBytesFields(
      new Uint8Array([8, 1]),
      [[2, Uint8Array.from([1, 2, 3, 4])]],
      undefined,
      small,
    )
    expect(fresh.buffer).not.toBe(small.buffer)
    expect(fresh).toEqual(whole)
  })
})
