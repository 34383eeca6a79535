import {
  type Dtype,
  decodeSafetensors,
  encodeSafetensors,
  type Tensor,
} from "../../../model/weights/index.ts"
import { ACCEPTED, type FuzzTarget, judge } from "../harness.ts"
import { mutateBytes, toHex } from "../mutate.ts"
import { mutateDoc } from "../mutate-json.ts"
import type { Random } from "../random.ts"
import { joinSafetensors, splitSafetensors } from "../safetensors-bytes.ts"

const DTYPES: ReadonlyArray<Dtype> = [
  "F64",
  "F32",
  "F16",
  "BF16",
  "I64",
  "I32",
  "I16",
  "I8",
  "U64",
  "U32",
  "U16",
  "U8",
  "BOOL",
]

const tensor = (rng: Random): Tensor => {
  const dtype = rng.pick(DTYPES)
  const shape = Array.from({ length: rng.int(4) }, () => rng.int(5))
  const n = shape.reduce((a, b) => a * b, 1)
  const floats = () => Float32Array.from({ length: n }, () => rng.next() * 4 - 2)
  switch (dtype) {
    case "F64":
      return { dtype, shape, data: Float64Array.from({ length: n }, () => rng.next()) }
    case "F32":
    case "F16":
    case "BF16":
      return { dtype, shape, data: floats() }
    case "I64":
      return {
        dtype,
        shape,
        data: BigInt64Array.from({ length: n }, () => BigInt(rng.int(99) - 50)),
      }
    case "U64":
      return { dtype, shape, data: BigUint64Array.from({ length: n }, () => BigInt(rng.int(99))) }
    case "I32":
      return { dtype, shape, data: Int32Array.from({ length: n }, () => rng.u32() | 0) }
    case "I16":
      return { dtype, shape, data: Int16Array.from({ length: n }, () => rng.int(65536) - 32768) }
    case "I8":
      return { dtype, shape, data: Int8Array.from({ length: n }, () => rng.int(256) - 128) }
    case "U32":
      return { dtype, shape, data: Uint32Array.from({ length: n }, () => rng.u32()) }
    case "U16":
      return { dtype, shape, data: Uint16Array.from({ length: n }, () => rng.int(65536)) }
    case "U8":
      return { dtype, shape, data: Uint8Array.from({ length: n }, () => rng.int(256)) }
    case "BOOL":
      return { dtype, shape, data: Uint8Array.from({ length: n }, () => rng.int(2)) }
  }
}

/** A valid file of a few random tensors (every dtype) and metadata. */
const validFile = (rng: Random): Uint8Array => {
  const tensors = new Map<string, Tensor>()
  const n = rng.int(5)
  for (let i = 0; i < n; i++) tensors.set(rng.bool(0.8) ? `t${i}` : rng.text(8, true), tensor(rng))
  tensors.delete("__metadata__")
  const metadata = rng.bool(0.7)
    ? { format: "pt", [rng.text(6, true)]: rng.text(12, true) }
    : undefined
  return encodeSafetensors(tensors, metadata)
}

/** Header mutations keep the length prefix right; byte mutations and random bytes do not. */
export const mutateSafetensors = (rng: Random, valid: Uint8Array): Uint8Array => {
  const roll = rng.next()
  if (roll < 0.1) return valid
  if (roll < 0.5) {
    const { header, data } = splitSafetensors(valid)
    return joinSafetensors(mutateDoc(rng, header), rng.bool(0.2) ? mutateBytes(rng, data) : data)
  }
  if (roll < 0.9) return mutateBytes(rng, valid)
  return rng.bytes(rng.size(64))
}

export const safetensorsTarget: FuzzTarget = {
  name: "safetensors",
  description: "safetensors files → decodeSafetensors (model/weights)",
  make: (rng) => {
    const bytes = mutateSafetensors(rng, validFile(rng))
    return {
      input: () => toHex(bytes),
      run: () =>
        judge(() => {
          decodeSafetensors(bytes)
          return ACCEPTED
        }),
    }
  },
}
