import {
  type Dtype,
  decode,
  decodeRouting,
  encodeSync,
  type PackedArray,
} from "../../../services/packed/index.ts"
import { type FuzzTarget, judgeEffect } from "../harness.ts"
import { mutateBytes, toHex } from "../mutate.ts"
import type { Random } from "../random.ts"

/**
 * Packed arrays as they arrive in a message: bytes, a dtype and a shape that may disagree with
 * each other (the shape and dtype come from the same untrusted message), and routing tables with
 * any num_experts and expert indices.
 */
const DTYPES: ReadonlyArray<Dtype> = ["uint8", "uint16", "uint32", "float32"]
const ODD_DTYPES = ["", "float64", "toString", "__proto__", "UINT8", "constructor"]
const ODD_DIMS = [-1, 0.5, Number.NaN, Infinity, 2 ** 53, 2 ** 31, 2 ** 32, -0]

const values = (rng: Random, dtype: Dtype, n: number) => {
  switch (dtype) {
    case "uint8":
      return Uint8Array.from({ length: n }, () => rng.int(256))
    case "uint16":
      return Uint16Array.from({ length: n }, () => rng.int(65536))
    case "uint32":
      return Uint32Array.from({ length: n }, () => rng.u32())
    case "float32":
      return Float32Array.from({ length: n }, () => rng.next())
  }
}

const shapeOf = (rng: Random): number[] => Array.from({ length: rng.int(4) }, () => rng.int(6))

const mutateShape = (rng: Random, shape: number[]): number[] => {
  const out = [...shape]
  if (out.length === 0 || rng.bool(0.3)) out.push(rng.bool() ? rng.pick(ODD_DIMS) : rng.int(6))
  else out[rng.int(out.length)] = rng.bool() ? rng.pick(ODD_DIMS) : rng.int(6)
  return rng.bool(0.2) ? out.slice(1) : out
}

interface PackedInput {
  readonly kind: "array" | "routing"
  readonly dtype: string
  readonly shape: number[]
  readonly numExperts: number
  readonly data: Uint8Array
}

const packedInput = (rng: Random): PackedInput => {
  const dtype = rng.pick(DTYPES)
  const shape = shapeOf(rng)
  const packed = encodeSync(
    "fuzz",
    values(
      rng,
      dtype,
      shape.reduce((a, b) => a * b, 1),
    ),
    shape,
  )
  const roll = rng.int(4)
  return {
    kind: "array",
    dtype: roll === 0 ? rng.pick([...ODD_DTYPES, ...DTYPES]) : dtype,
    shape: roll === 1 ? mutateShape(rng, shape) : shape,
    numExperts: 0,
    data:
      roll === 2
        ? mutateBytes(rng, packed.data)
        : roll === 3
          ? rng.bytes(rng.size(64))
          : packed.data,
  }
}

const routingInput = (rng: Random): PackedInput => {
  const numExperts = rng.bool(0.8)
    ? rng.pick([2, 8, 256, 257, 65536])
    : rng.pick([0, -1, 1.5, 65537, Number.NaN])
  const shape = [rng.int(5), rng.range(1, 3), rng.range(1, 2)]
  const wide = numExperts > 256
  const n = shape.reduce((a, b) => a * b, 1)
  const experts = Math.max(1, Math.min(65536, Math.floor(numExperts) || 1))
  const rows = wide
    ? Uint16Array.from({ length: n }, () => rng.int(experts + (rng.bool(0.1) ? 3 : 0)))
    : Uint8Array.from({ length: n }, () =>
        rng.int(Math.min(256, experts + (rng.bool(0.1) ? 3 : 0))),
      )
  const data = new Uint8Array(rows.buffer)
  return {
    kind: "routing",
    dtype: wide ? "uint16" : "uint8",
    shape: rng.bool(0.3) ? mutateShape(rng, shape) : shape,
    numExperts,
    data: rng.bool(0.3) ? mutateBytes(rng, data) : data,
  }
}

const run = (input: PackedInput) =>
  input.kind === "routing"
    ? judgeEffect(
        decodeRouting(input.data, {
          shape: input.shape as [number, number, number],
          numExperts: input.numExperts,
        }),
      )
    : // The dtype is deliberately any string: decode must check it, not trust the type.
      judgeEffect(
        decode("fuzz", {
          dtype: input.dtype,
          shape: input.shape,
          data: input.data,
        } as PackedArray<Dtype>),
      )

export const packedTarget: FuzzTarget = {
  name: "packed arrays",
  description: "bytes + dtype + shape, routing tables → decode, decodeRouting (services/packed)",
  make: (rng) => {
    const input = rng.bool(0.6) ? packedInput(rng) : routingInput(rng)
    return {
      input: () => JSON.stringify({ ...input, data: toHex(input.data) }),
      run: () => run(input),
    }
  },
}
