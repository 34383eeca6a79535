import {
  create,
  type DescField,
  type DescMessage,
  type MessageShape,
  ScalarType,
  toBinary,
} from "@bufbuild/protobuf"
import { reflect } from "@bufbuild/protobuf/reflect"
import type { Random } from "./random.ts"

/**
 * Random, valid messages of any schema, read off its descriptor: every field kind (scalars at
 * their edges, enums with unknown values, nested messages, lists, maps, oneofs), a bounded
 * depth and size. The seeds that mutations start from.
 */

const FLOAT32_MAX = 3.4028234663852886e38
const I32 = [0, 1, -1, 2 ** 31 - 1, -(2 ** 31), 127, 128, 255, 256, 65535, 65536]
const U32 = [0, 1, 2 ** 32 - 1, 2 ** 31, 127, 128, 255, 256, 65535, 65536]
const I64 = [0n, 1n, -1n, 2n ** 63n - 1n, -(2n ** 63n), 2n ** 53n, 2n ** 53n + 1n]
const U64 = [0n, 1n, 2n ** 64n - 1n, 2n ** 63n, 2n ** 53n + 1n]
const DOUBLES = [0, -0, 1, -1, 0.5, Number.NaN, Infinity, -Infinity, Number.MAX_VALUE, 5e-324]
const FLOATS = [0, -0, 1, -1, 0.5, Number.NaN, Infinity, -Infinity, FLOAT32_MAX, 1e-45]

const bigintOfBits = (rng: Random, bits: 64, signed: boolean): bigint => {
  const v = (BigInt(rng.u32()) << 32n) | BigInt(rng.u32())
  return signed ? BigInt.asIntN(bits, v) : v
}

export const randomScalar = (rng: Random, type: ScalarType): unknown => {
  const edge = rng.bool(0.3)
  switch (type) {
    case ScalarType.DOUBLE:
      return edge ? rng.pick(DOUBLES) : (rng.next() - 0.5) * 10 ** rng.range(-5, 12)
    case ScalarType.FLOAT:
      return edge ? rng.pick(FLOATS) : Math.fround((rng.next() - 0.5) * 10 ** rng.range(-5, 12))
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return edge ? rng.pick(I32) : rng.u32() | 0
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return edge ? rng.pick(U32) : rng.bool() ? rng.int(1000) : rng.u32()
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return edge ? rng.pick(I64) : rng.bool() ? BigInt(rng.int(1000)) : bigintOfBits(rng, 64, true)
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return edge
        ? rng.pick(U64)
        : rng.bool()
          ? BigInt(rng.int(1000))
          : bigintOfBits(rng, 64, false)
    case ScalarType.BOOL:
      return rng.bool()
    case ScalarType.STRING:
      return rng.bool(0.3)
        ? rng.pick(["", "a", "job-1", "/app", "t1.v1.Batch"])
        : rng.text(48, true)
    case ScalarType.BYTES:
      return rng.bytes(rng.size(256))
  }
}

const randomEnum = (rng: Random, field: DescField): number => {
  const values = field.enum?.values ?? []
  if (values.length === 0 || rng.bool(0.1)) return rng.pick([0, 1, 99, -1, 2 ** 31 - 1])
  return rng.pick(values).number
}

/** A random message of `schema`; depth bounds recursion through nested messages. */
export const randomMessage = <Desc extends DescMessage>(
  rng: Random,
  schema: Desc,
  depth = 0,
): MessageShape<Desc> => {
  const message = create(schema)
  const r = reflect(schema, message)
  const density = depth === 0 ? 0.8 : 0.5
  for (const field of schema.fields) {
    if (field.oneof !== undefined && r.oneofCase(field.oneof) !== undefined) continue
    if (!rng.bool(density)) continue
    switch (field.fieldKind) {
      case "scalar":
        r.set(field, randomScalar(rng, field.scalar))
        break
      case "enum":
        r.set(field, randomEnum(rng, field))
        break
      case "message":
        if (depth < 3)
          r.set(field, reflect(field.message, randomMessage(rng, field.message, depth + 1)))
        break
      case "list": {
        const list = r.get(field)
        const n = rng.size(6)
        for (let i = 0; i < n; i++) {
          if (field.listKind === "scalar") list.add(randomScalar(rng, field.scalar))
          else if (field.listKind === "enum") list.add(randomEnum(rng, field))
          else if (depth < 3)
            list.add(reflect(field.message, randomMessage(rng, field.message, depth + 1)))
        }
        break
      }
      case "map": {
        const map = r.get(field)
        const n = rng.size(4)
        for (let i = 0; i < n; i++) {
          const key = randomScalar(rng, field.mapKey)
          if (field.mapKind === "scalar") map.set(key, randomScalar(rng, field.scalar))
          else if (field.mapKind === "enum") map.set(key, randomEnum(rng, field))
          else if (depth < 3)
            map.set(key, reflect(field.message, randomMessage(rng, field.message, depth + 1)))
        }
        break
      }
    }
  }
  return message
}

/** The wire bytes of a random message of `schema`. */
export const randomEncoding = (rng: Random, schema: DescMessage): Uint8Array =>
  toBinary(schema, randomMessage(rng, schema))

/**
 * An input for a decoder of `schema`: mostly a mutated valid encoding, sometimes random bytes,
 * sometimes the valid encoding untouched (so acceptance is exercised too).
 */
export const protoInput = (
  rng: Random,
  schema: DescMessage,
  mutate: (rng: Random, bytes: Uint8Array) => Uint8Array,
): Uint8Array => {
  const roll = rng.next()
  if (roll < 0.15) return rng.bytes(rng.size(256))
  const valid = randomEncoding(rng, schema)
  return roll < 0.25 ? valid : mutate(rng, valid)
}
