import { BinaryReader, WireType } from "@bufbuild/protobuf/wire"
import type { Random } from "./random.ts"

/**
 * Mutations of valid inputs: byte-level (bit flips, truncation, extension, splices) and, for
 * protobuf, field-level (a field duplicated, dropped or moved, a length prefix or wire type
 * changed, an unknown field appended), so that decoders see both garbage and near-misses.
 */

const INTERESTING = [0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, 0x0a, 0x22, 0x08, 0x12]
/** Varints that decode to edge values: 2^31, 2^32 − 1, 2^63 and a never-ending one. */
const VARINTS = [
  [0x80, 0x80, 0x80, 0x80, 0x08],
  [0xff, 0xff, 0xff, 0xff, 0x0f],
  [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
  [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
]

const concat = (...parts: ReadonlyArray<ArrayLike<number>>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

const varint = (n: number): number[] => {
  const out: number[] = []
  let v = n
  while (v >= 0x80) {
    out.push((v % 128) | 0x80)
    v = Math.floor(v / 128)
  }
  out.push(v)
  return out
}

type ByteMutation = (rng: Random, b: Uint8Array) => Uint8Array

const BYTE_MUTATIONS: ReadonlyArray<ByteMutation> = [
  // flip one bit
  (rng, b) => {
    if (b.length === 0) return rng.bytes(1)
    const out = b.slice()
    const i = rng.int(b.length)
    out[i] = (out[i] ?? 0) ^ (1 << rng.int(8))
    return out
  },
  // overwrite a byte with an edge value
  (rng, b) => {
    if (b.length === 0) return Uint8Array.of(rng.pick(INTERESTING))
    const out = b.slice()
    out[rng.int(b.length)] = rng.pick(INTERESTING)
    return out
  },
  // truncate
  (rng, b) => b.slice(0, rng.int(b.length + 1)),
  // extend with random bytes
  (rng, b) => concat(b, rng.bytes(rng.range(1, 16))),
  // insert random bytes or an edge varint
  (rng, b) => {
    const at = rng.int(b.length + 1)
    const insert = rng.bool() ? rng.pick(VARINTS) : rng.bytes(rng.range(1, 8))
    return concat(b.subarray(0, at), insert, b.subarray(at))
  },
  // delete a range
  (rng, b) => {
    const at = rng.int(b.length + 1)
    return concat(b.subarray(0, at), b.subarray(Math.min(b.length, at + rng.range(1, 8))))
  },
  // copy a range elsewhere
  (rng, b) => {
    const from = rng.int(b.length + 1)
    const piece = b.subarray(from, from + rng.range(1, 32))
    const at = rng.int(b.length + 1)
    return concat(b.subarray(0, at), piece, b.subarray(at))
  },
]

/** One to three byte-level mutations of `bytes` (never modified in place). */
export const mutateBytes = (rng: Random, bytes: Uint8Array): Uint8Array => {
  let out = bytes
  const n = rng.range(1, 3)
  for (let i = 0; i < n; i++) out = rng.pick(BYTE_MUTATIONS)(rng, out)
  return out
}

interface WireField {
  readonly start: number
  readonly end: number
  readonly fieldNo: number
  readonly wireType: WireType
  /** Where the length prefix starts (length-delimited fields only). */
  readonly lengthAt: number
}

/** The top-level fields of a valid encoding, with their byte ranges. */
export const wireFields = (bytes: Uint8Array): WireField[] => {
  const fields: WireField[] = []
  const reader = new BinaryReader(bytes)
  try {
    while (reader.pos < reader.len) {
      const start = reader.pos
      const [fieldNo, wireType] = reader.tag()
      const lengthAt = reader.pos
      reader.skip(wireType, fieldNo)
      fields.push({ start, end: reader.pos, fieldNo, wireType, lengthAt })
    }
  } catch {
    // Not (or no longer) a valid encoding: the fields read so far are all there are.
  }
  return fields
}

type FieldMutation = (rng: Random, b: Uint8Array, fields: ReadonlyArray<WireField>) => Uint8Array

const FIELD_MUTATIONS: ReadonlyArray<FieldMutation> = [
  // duplicate a field (a repeated singular field: last one wins, or a list grows)
  (rng, b, fields) => {
    const f = rng.pick(fields)
    const at = rng.pick(fields).end
    return concat(b.subarray(0, at), b.subarray(f.start, f.end), b.subarray(at))
  },
  // drop a field
  (rng, b, fields) => {
    const f = rng.pick(fields)
    return concat(b.subarray(0, f.start), b.subarray(f.end))
  },
  // move a field to the end
  (rng, b, fields) => {
    const f = rng.pick(fields)
    return concat(b.subarray(0, f.start), b.subarray(f.end), b.subarray(f.start, f.end))
  },
  // change a field's wire type
  (rng, b, fields) => {
    const f = rng.pick(fields)
    const out = b.slice()
    out[f.start] = ((out[f.start] ?? 0) & ~7) | rng.pick([0, 1, 2, 3, 4, 5, 6, 7])
    return out
  },
  // replace a length prefix with a smaller, larger or absurd one
  (rng, b, fields) => {
    const delimited = fields.filter((f) => f.wireType === WireType.LengthDelimited)
    if (delimited.length === 0) return mutateBytes(rng, b)
    const f = rng.pick(delimited)
    const reader = new BinaryReader(b.subarray(f.lengthAt))
    const length = reader.uint32()
    const prefixEnd = f.lengthAt + reader.pos
    const wanted = rng.pick([0, length - 1, length + 1, length * 2 + 7, 2 ** 31 - 1, 2 ** 32 - 1])
    return concat(b.subarray(0, f.lengthAt), varint(Math.max(0, wanted)), b.subarray(prefixEnd))
  },
  // mutate the bytes inside one field only (nested messages, packed arrays)
  (rng, b, fields) => {
    const f = rng.pick(fields)
    return concat(
      b.subarray(0, f.start),
      mutateBytes(rng, b.subarray(f.start, f.end)),
      b.subarray(f.end),
    )
  },
  // append an unknown field of any wire type
  (rng, b) => {
    const fieldNo = rng.pick([99, 536_870_911, 15, 16, 1000])
    const wireType = rng.pick([0, 1, 2, 5])
    const body =
      wireType === 0
        ? rng.pick(VARINTS)
        : wireType === 1
          ? rng.bytes(8)
          : wireType === 5
            ? rng.bytes(4)
            : [...varint(3), ...rng.bytes(3)]
    return concat(b, varint(fieldNo * 8 + wireType), body)
  },
]

/** A protobuf-aware mutation of a valid encoding, falling back to byte mutations. */
export const mutateProto = (rng: Random, bytes: Uint8Array): Uint8Array => {
  const fields = wireFields(bytes)
  if (fields.length === 0 || rng.bool(0.3)) return mutateBytes(rng, bytes)
  const out = rng.pick(FIELD_MUTATIONS)(rng, bytes, fields)
  return rng.bool(0.2) ? mutateBytes(rng, out) : out
}

export const toHex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex")
