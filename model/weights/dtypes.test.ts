import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { bf16BitsToF32, bf16Round, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from "./dtypes.ts"

const f32 = (...xs: number[]) => new Float32Array(xs)
const fromBits = (bits: number): number =>
  new Float32Array(new Uint32Array([bits]).buffer)[0] as number

describe("bfloat16", () => {
  it("rounds to nearest, ties to even", () => {
    // Between 1 and 2 a bf16 step is 2^-7 = 0.0078125.
    const out = bf16Round(
      f32(
        1.00390625, // 1 + 2^-8: exactly half way between 1 and 1.0078125; 1 is even → 1
        1.01171875, // 1 + 3·2^-8: half way between 1.0078125 (odd) and 1.015625 (even) → 1.015625
        1.0048828125, // just above half way → up
        1.0029296875, // just below half way → down
        -1.01171875, // sign is kept
        1.0078125, // exactly representable
      ),
    )
    expect([...out]).toEqual([1, 1.015625, 1.0078125, 1, -1.015625, 1.0078125])
  })

  it("bit patterns: 1.0 is 0x3f80, -2 is 0xc000, pi is 0x4049", () => {
    expect([...f32ToBf16Bits(f32(1, -2, Math.PI))]).toEqual([0x3f80, 0xc000, 0x4049])
  })

  it("keeps infinities, zeros and NaN; the largest f32 rounds up to infinity", () => {
    const out = bf16Round(f32(Infinity, -Infinity, 0, -0, Number.NaN, 3.4028234663852886e38))
    expect(out[0]).toBe(Infinity)
    expect(out[1]).toBe(-Infinity)
    expect(Object.is(out[2], 0)).toBe(true)
    expect(Object.is(out[3], -0)).toBe(true)
    expect(out[4]).toBeNaN()
    expect(out[5]).toBe(Infinity)
    // A signalling-looking NaN whose payload lives only in the low 16 bits stays a NaN.
    expect(bf16Round(f32(fromBits(0x7f800001)))[0]).toBeNaN()
  })

  it("does not change its input and is idempotent", () => {
    fc.assert(
      fc.property(fc.float32Array({ noDefaultInfinity: false, maxLength: 64 }), (x) => {
        const copy = x.slice()
        const once = bf16Round(x)
        expect(x).toEqual(copy)
        expect(bf16Round(once)).toEqual(once)
      }),
    )
  })

  it("is the nearest bf16 value (error at most half a step)", () => {
    fc.assert(
      fc.property(
        fc.float({
          noNaN: true,
          noDefaultInfinity: true,
          min: Math.fround(-1e30),
          max: Math.fround(1e30),
        }),
        (v) => {
          const x = Math.fround(v)
          const r = bf16Round(f32(x))[0] as number
          if (x === 0) {
            expect(Object.is(r, x)).toBe(true)
          } else {
            const exponent = Math.floor(Math.log2(Math.abs(x)))
            const step = 2 ** Math.max(exponent - 7, -133)
            expect(Math.abs(r - x)).toBeLessThanOrEqual(step / 2)
          }
        },
      ),
    )
  })

  it("every bf16 bit pattern survives decode → encode", () => {
    const all = new Uint16Array(65536).map((_, i) => i)
    const back = f32ToBf16Bits(bf16BitsToF32(all))
    for (let h = 0; h < 65536; h++) {
      const nan = (h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0
      expect(back[h]).toBe(nan ? h | 0x40 : h)
    }
  })
})

describe("float16", () => {
  it("rounds to nearest, ties to even", () => {
    // Between 1 and 2 a half step is 2^-10.
    const h = f32ToF16Bits(
      f32(
        1 + 2 ** -11, // tie → 1 (even)
        1 + 3 * 2 ** -11, // tie between 1+2^-10 (odd) and 1+2^-9 (even) → 1+2^-9
        65504, // largest half
        65519, // below the tie with 65536 → 65504
        65520, // tie → even → infinity
        2 ** -24, // smallest subnormal
        2 ** -25, // tie with zero → 0
        1.5 * 2 ** -25, // above the tie → smallest subnormal
        2 ** -14, // smallest normal
        2 ** -14 - 2 ** -25, // rounds up from the subnormal range into the normals
      ),
    )
    expect([...h].map((b) => b.toString(16))).toEqual([
      "3c00",
      "3c02",
      "7bff",
      "7bff",
      "7c00",
      "1",
      "0",
      "1",
      "400",
      "400",
    ])
  })

  it("decodes specials", () => {
    const x = f16BitsToF32(
      new Uint16Array([0x3c00, 0xc000, 0x7c00, 0xfc00, 0x7e00, 0x8000, 0x0001]),
    )
    expect([...x.subarray(0, 4)]).toEqual([1, -2, Infinity, -Infinity])
    expect(x[4]).toBeNaN()
    expect(Object.is(x[5], -0)).toBe(true)
    expect(x[6]).toBe(2 ** -24)
  })

  it("every half bit pattern survives decode → encode", () => {
    const all = new Uint16Array(65536).map((_, i) => i)
    const back = f32ToF16Bits(f16BitsToF32(all))
    for (let h = 0; h < 65536; h++) {
      if ((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0)
        expect(back[h] as number & 0x7e00).toBe(0x7e00)
      else expect(back[h]).toBe(h)
    }
  })

  it("is no farther from the input than either neighbouring half", () => {
    fc.assert(
      fc.property(
        fc.float({ noNaN: true, noDefaultInfinity: true, min: -65519, max: 65519 }),
        (v) => {
          const x = Math.fround(v)
          const h = f32ToF16Bits(f32(x))[0] as number
          const got = f16BitsToF32(new Uint16Array([h]))[0] as number
          const neighbours = f16BitsToF32(new Uint16Array([h - 1, h + 1].filter((n) => n >= 0)))
          for (const n of neighbours) {
            if (Number.isFinite(n) && Math.sign(n) === Math.sign(got)) {
              expect(Math.abs(got - x)).toBeLessThanOrEqual(Math.abs(n - x))
            }
          }
        },
      ),
    )
  })
})
