/**
 * Element types of the safetensors format and their in-memory arrays, plus the bfloat16 and
 * IEEE half conversions. Half-precision tensors live in memory as Float32Array (every bf16 and
 * f16 value is exactly representable in f32); encoding rounds to nearest, ties to even.
 */

export type Dtype =
  | "F64"
  | "F32"
  | "F16"
  | "BF16"
  | "I64"
  | "I32"
  | "I16"
  | "I8"
  | "U64"
  | "U32"
  | "U16"
  | "U8"
  | "BOOL"

/** The array each dtype is held in. */
export interface DtypeArrays {
  F64: Float64Array
  F32: Float32Array
  F16: Float32Array
  BF16: Float32Array
  I64: BigInt64Array
  I32: Int32Array
  I16: Int16Array
  I8: Int8Array
  U64: BigUint64Array
  U32: Uint32Array
  U16: Uint16Array
  U8: Uint8Array
  /** One byte per element, 0 or 1. */
  BOOL: Uint8Array
}

/** A named tensor's value: dtype, row-major shape (`[]` for a scalar) and flat data. */
export type Tensor = {
  [D in Dtype]: {
    readonly dtype: D
    readonly shape: readonly number[]
    readonly data: DtypeArrays[D]
  }
}[Dtype]

/** Bytes per element in the file. */
export const DTYPE_BYTES: Readonly<Record<Dtype, number>> = {
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U64: 8,
  U32: 4,
  U16: 2,
  U8: 1,
  BOOL: 1,
}

type ArrayConstructor = abstract new (...args: never[]) => DtypeArrays[Dtype]

/** The array class each dtype must be given in (checked on encode). */
export const DTYPE_ARRAY: Readonly<Record<Dtype, ArrayConstructor>> = {
  F64: Float64Array,
  F32: Float32Array,
  F16: Float32Array,
  BF16: Float32Array,
  I64: BigInt64Array,
  I32: Int32Array,
  I16: Int16Array,
  I8: Int8Array,
  U64: BigUint64Array,
  U32: Uint32Array,
  U16: Uint16Array,
  U8: Uint8Array,
  BOOL: Uint8Array,
}

export function isDtype(s: string): s is Dtype {
  return Object.hasOwn(DTYPE_BYTES, s)
}

// ---------------------------------------------------------------------------------------------
// bfloat16: the top 16 bits of an f32.

/** bfloat16 bit patterns of `x`, rounded to nearest, ties to even; NaN stays a (quiet) NaN. */
export function f32ToBf16Bits(x: Float32Array): Uint16Array {
  const bits = new Uint32Array(x.buffer, x.byteOffset, x.length)
  const out = new Uint16Array(x.length)
  for (let i = 0; i < bits.length; i++) {
    const b = bits[i] as number
    if ((b & 0x7fffffff) > 0x7f800000) {
      out[i] = (b >>> 16) | 0x0040
    } else {
      // Adding 0x7fff plus the lowest kept bit carries into bit 16 exactly when the dropped half
      // is above one half, or equal to it and the kept part is odd. No overflow: b ≤ 0xff800000.
      out[i] = (b + 0x7fff + ((b >>> 16) & 1)) >>> 16
    }
  }
  return out
}

/** f32 values of bfloat16 bit patterns (exact). */
export function bf16BitsToF32(h: Uint16Array): Float32Array {
  const out = new Float32Array(h.length)
  const bits = new Uint32Array(out.buffer)
  for (let i = 0; i < h.length; i++) bits[i] = (h[i] as number) << 16
  return out
}

/**
 * Each value rounded to the nearest bfloat16 (ties to even) and returned as f32, to run weights
 * at bf16 precision without a bf16 kernel. A new array; `x` is not changed.
 */
export function bf16Round(x: Float32Array): Float32Array {
  return bf16BitsToF32(f32ToBf16Bits(x))
}

// ---------------------------------------------------------------------------------------------
// IEEE 754 binary16.

function f32BitsToF16Bits(b: number): number {
  const sign = (b >>> 16) & 0x8000
  const exp = (b >>> 23) & 0xff
  const mant = b & 0x7fffff
  if (exp === 0xff) return mant === 0 ? sign | 0x7c00 : sign | 0x7e00 | (mant >>> 13)
  const e = exp - 127 + 15
  if (e >= 0x1f) return sign | 0x7c00
  if (e <= 0) {
    // Subnormal half (or zero): value / 2^-24 = (1.mant · 2^23) / 2^(14 - e).
    if (e < -10) return sign
    const full = mant | 0x800000
    const shift = 14 - e
    let m = full >>> shift
    const rem = full & ((1 << shift) - 1)
    const halfway = 1 << (shift - 1)
    if (rem > halfway || (rem === halfway && (m & 1) === 1)) m++
    return sign | m // m may reach 0x400: the smallest normal, encoded correctly by the carry
  }
  let h = (e << 10) | (mant >>> 13)
  const rem = mant & 0x1fff
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1) === 1)) h++ // a carry may reach infinity: right
  return sign | h
}

/** IEEE half bit patterns of `x`, rounded to nearest, ties to even; overflow goes to ±Infinity. */
export function f32ToF16Bits(x: Float32Array): Uint16Array {
  const bits = new Uint32Array(x.buffer, x.byteOffset, x.length)
  const out = new Uint16Array(x.length)
  for (let i = 0; i < bits.length; i++) out[i] = f32BitsToF16Bits(bits[i] as number)
  return out
}

let f16Table: Float32Array | undefined

function f16Values(): Float32Array {
  if (f16Table !== undefined) return f16Table
  const table = new Float32Array(65536)
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1
    const exp = (h >>> 10) & 0x1f
    const mant = h & 0x3ff
    if (exp === 0) table[h] = sign * mant * 2 ** -24
    else if (exp === 0x1f) table[h] = mant === 0 ? sign * Number.POSITIVE_INFINITY : Number.NaN
    else table[h] = sign * (1 + mant / 1024) * 2 ** (exp - 15)
  }
  f16Table = table
  return table
}

/** f32 values of IEEE half bit patterns (exact; NaN payloads are not kept). */
export function f16BitsToF32(h: Uint16Array): Float32Array {
  const table = f16Values()
  const out = new Float32Array(h.length)
  for (let i = 0; i < h.length; i++) out[i] = table[h[i] as number] as number
  return out
}
