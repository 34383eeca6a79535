import { Effect, Result } from "effect"
import { decodeResult, encodeResult } from "./codec.ts"
import type { RoutingDtype } from "./dtype.ts"
import { routingDtypeResult } from "./dtype.ts"
import { PackedArrayError } from "./errors.ts"
import type { PackedArray } from "./packed-array.ts"
import { coordinatesOf } from "./shape.ts"

export type RoutingValues = Uint8Array | Uint16Array

/** Which experts each token used in each MoE layer: row-major `[tokens, layers, top_k]`. */
export interface RoutingSpec {
  readonly shape: readonly [tokens: number, layers: number, topK: number]
  readonly numExperts: number
  /** Name used in error messages; `routing` unless the message has several tables. */
  readonly field?: string
}

const checkRank = (field: string, shape: ReadonlyArray<number>) =>
  shape.length === 3
    ? Result.succeed(shape)
    : Result.fail(
        new PackedArrayError({
          field,
          expected: "shape [tokens, layers, top_k]",
          actual: `[${shape.join(", ")}]`,
        }),
      )

/**
 * The position of the first expert index ≥ `numExperts`, or -1. A dtype that cannot hold such an
 * index (uint8 with 256 experts) is not scanned.
 */
export const firstExpertOutOfRange = (values: RoutingValues, numExperts: number): number => {
  const max = values instanceof Uint8Array ? 0xff : 0xffff
  if (numExperts > max) return -1
  for (let i = 0; i < values.length; i++) if ((values[i] ?? 0) >= numExperts) return i
  return -1
}

/** Replaying a route to a nonexistent expert would index out of the expert table. */
const checkIndices = (
  field: string,
  values: RoutingValues,
  spec: RoutingSpec,
): Result.Result<RoutingValues, PackedArrayError> => {
  const i = firstExpertOutOfRange(values, spec.numExperts)
  if (i < 0) return Result.succeed(values)
  const [token, layer, k] = coordinatesOf(i, spec.shape)
  return Result.fail(
    new PackedArrayError({
      field,
      expected: `expert indices < ${spec.numExperts}`,
      actual: `${values[i] ?? 0} at [token ${token}, layer ${layer}, k ${k}]`,
    }),
  )
}

export const encodeRoutingResult = (
  values: RoutingValues,
  spec: RoutingSpec,
): Result.Result<PackedArray<RoutingDtype>, PackedArrayError> => {
  const field = spec.field ?? "routing"
  return Result.gen(function* () {
    yield* checkRank(field, spec.shape)
    const dtype = yield* routingDtypeResult(spec.numExperts, field)
    const packed = yield* encodeResult(field, values, spec.shape)
    if (packed.dtype !== dtype) {
      return yield* Result.fail(
        new PackedArrayError({
          field,
          expected: `${dtype} for ${spec.numExperts} experts`,
          actual: packed.dtype,
        }),
      )
    }
    yield* checkIndices(field, values, spec)
    return { ...packed, dtype }
  })
}

export const decodeRoutingResult = (
  data: Uint8Array,
  spec: RoutingSpec,
): Result.Result<RoutingValues, PackedArrayError> => {
  const field = spec.field ?? "routing"
  return Result.gen(function* () {
    yield* checkRank(field, spec.shape)
    const dtype = yield* routingDtypeResult(spec.numExperts, field)
    const values = yield* decodeResult<RoutingDtype>(field, { dtype, shape: spec.shape, data })
    return yield* checkIndices(field, values, spec)
  })
}

/** Packs a routing table; its dtype must be {@link routingDtypeFor}(numExperts). */
export const encodeRouting = (
  values: RoutingValues,
  spec: RoutingSpec,
): Effect.Effect<PackedArray<RoutingDtype>, PackedArrayError> =>
  Effect.suspend(() => Effect.fromResult(encodeRoutingResult(values, spec)))

export const encodeRoutingSync = (
  values: RoutingValues,
  spec: RoutingSpec,
): PackedArray<RoutingDtype> => Result.getOrThrow(encodeRoutingResult(values, spec))

/** Unpacks a routing table, checking its byte length and that every index < numExperts. */
export const decodeRouting = (
  data: Uint8Array,
  spec: RoutingSpec,
): Effect.Effect<RoutingValues, PackedArrayError> =>
  Effect.suspend(() => Effect.fromResult(decodeRoutingResult(data, spec)))

export const decodeRoutingSync = (data: Uint8Array, spec: RoutingSpec): RoutingValues =>
  Result.getOrThrow(decodeRoutingResult(data, spec))

/**
 * Why `bytes` of routing cannot be the table `shape` ([tokens, layers, top_k]) describes with
 * `bytesPerIndex` (1 for uint8, 2 for uint16), or undefined when they fit. The one shape check
 * of a routing table, at ingest and in the learner.
 */
export const routingShapeProblem = (
  bytes: number,
  shape: ReadonlyArray<number>,
  bytesPerIndex: number,
): string | undefined => {
  if (shape.length !== 3)
    return `routing shape [${shape.join(", ")}] is not [tokens, layers, top_k]`
  const [rows = 0, layers = 0, topK = 0] = shape
  const needs = rows * layers * topK * bytesPerIndex
  return needs === bytes
    ? undefined
    : `routing is ${bytes} bytes, shape [${shape.join(", ")}] needs ${needs}`
}
