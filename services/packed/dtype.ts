import { Result } from "effect"
import { PackedArrayError } from "./errors.ts"

interface TypedArrays {
  readonly uint8: Uint8Array
  readonly uint16: Uint16Array
  readonly uint32: Uint32Array
  readonly float32: Float32Array
}

export type Dtype = keyof TypedArrays
export type TypedArrayOf<D extends Dtype> = TypedArrays[D]
export type PackedValues = TypedArrays[Dtype]
export type DtypeOf<T extends PackedValues> = T extends Float32Array
  ? "float32"
  : T extends Uint32Array
    ? "uint32"
    : T extends Uint16Array
      ? "uint16"
      : "uint8"
export type RoutingDtype = "uint8" | "uint16"

export const BYTES_PER_ELEMENT: Readonly<Record<Dtype, number>> = {
  uint8: 1,
  uint16: 2,
  uint32: 4,
  float32: 4,
}

/** Exclusive upper bound of an expert index, so a uint16 routing table addresses 65 536. */
export const MAX_EXPERTS = 65_536

export const dtypeOf = (values: PackedValues): Dtype | undefined => {
  if (values instanceof Uint8Array) return "uint8"
  if (values instanceof Uint16Array) return "uint16"
  if (values instanceof Uint32Array) return "uint32"
  if (values instanceof Float32Array) return "float32"
  return undefined
}

/** A typed array of `dtype` over `length` elements of `buffer`; never copies. */
export const viewAs = <D extends Dtype>(
  dtype: D,
  buffer: ArrayBufferLike,
  byteOffset: number,
  length: number,
): TypedArrayOf<D> => {
  const view: PackedValues =
    dtype === "uint8"
      ? new Uint8Array(buffer, byteOffset, length)
      : dtype === "uint16"
        ? new Uint16Array(buffer, byteOffset, length)
        : dtype === "uint32"
          ? new Uint32Array(buffer, byteOffset, length)
          : new Float32Array(buffer, byteOffset, length)
  // The branches above pair each dtype with its own constructor; TS cannot narrow D from them.
  return view as TypedArrayOf<D>
}

export const routingDtypeResult = (
  numExperts: number,
  field = "routing",
): Result.Result<RoutingDtype, PackedArrayError> =>
  Number.isSafeInteger(numExperts) && numExperts >= 1 && numExperts <= MAX_EXPERTS
    ? Result.succeed(numExperts <= 256 ? "uint8" : "uint16")
    : Result.fail(
        new PackedArrayError({
          field,
          expected: `num_experts in 1..${MAX_EXPERTS}`,
          actual: String(numExperts),
        }),
      )

/** uint8 while every expert index fits a byte (num_experts <= 256), else uint16. */
export const routingDtypeFor = (numExperts: number): RoutingDtype =>
  Result.getOrThrow(routingDtypeResult(numExperts))
