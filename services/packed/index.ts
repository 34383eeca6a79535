/**
 * Large numeric arrays as protobuf `bytes` fields: little-endian typed-array contents,
 * row-major. Encoding is zero-copy on little-endian hosts; decoding is zero-copy when the bytes
 * are aligned and always checks length, shape and (for routing) expert indices first.
 */

export { BufferPool } from "./buffer-pool.ts"
export { decode, decodeSync, encode, encodeSync } from "./codec.ts"
export { concatBytes } from "./concat.ts"
export type { Dtype, DtypeOf, PackedValues, RoutingDtype, TypedArrayOf } from "./dtype.ts"
export { BYTES_PER_ELEMENT, MAX_EXPERTS, routingDtypeFor } from "./dtype.ts"
export { PackedArrayError } from "./errors.ts"
export type { PackedArray } from "./packed-array.ts"
export type { RoutingSpec, RoutingValues } from "./routing.ts"
export {
  decodeRouting,
  decodeRoutingSync,
  encodeRouting,
  encodeRoutingSync,
  firstExpertOutOfRange,
  routingShapeProblem,
} from "./routing.ts"
export { type BytesField, spliceBytesFields } from "./splice.ts"
