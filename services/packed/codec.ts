import { Effect, Result } from "effect"
import type { Dtype, DtypeOf, PackedValues, TypedArrayOf } from "./dtype.ts"
import { BYTES_PER_ELEMENT, dtypeOf } from "./dtype.ts"
import { fromLittleEndian, toLittleEndian } from "./endian.ts"
import { PackedArrayError } from "./errors.ts"
import type { PackedArray } from "./packed-array.ts"
import { elementCount, formatShape } from "./shape.ts"

export const encodeResult = <T extends PackedValues>(
  field: string,
  values: T,
  shape: ReadonlyArray<number> = [values.length],
): Result.Result<PackedArray<DtypeOf<T>>, PackedArrayError> => {
  const dtype = dtypeOf(values)
  if (dtype === undefined) {
    return Result.fail(
      new PackedArrayError({
        field,
        expected: "a Uint8Array, Uint16Array, Uint32Array or Float32Array",
        actual: Object.prototype.toString.call(values),
      }),
    )
  }
  return Result.flatMap(elementCount(field, shape), (count) =>
    count === values.length
      ? Result.succeed({
          // dtypeOf maps each typed-array class to the same name DtypeOf<T> computes.
          dtype: dtype as DtypeOf<T>,
          shape: [...shape],
          data: toLittleEndian(values, BYTES_PER_ELEMENT[dtype]),
        })
      : Result.fail(
          new PackedArrayError({
            field,
            expected: `${formatShape(shape)} ${dtype} = ${count} elements`,
            actual: `${values.length}`,
          }),
        ),
  )
}

export const decodeResult = <D extends Dtype>(
  field: string,
  packed: PackedArray<D>,
): Result.Result<TypedArrayOf<D>, PackedArrayError> => {
  const { dtype, shape, data } = packed
  // dtype often comes off the wire, so it is checked rather than trusted to be a Dtype.
  if (!Object.hasOwn(BYTES_PER_ELEMENT, dtype)) {
    return Result.fail(
      new PackedArrayError({
        field,
        expected: "dtype uint8, uint16, uint32 or float32",
        actual: String(dtype),
      }),
    )
  }
  const width = BYTES_PER_ELEMENT[dtype]
  return Result.flatMap(elementCount(field, shape), (count) => {
    const expectedBytes = count * width
    if (data.byteLength === expectedBytes) return Result.succeed(fromLittleEndian(data, dtype))
    const ragged = data.byteLength % width === 0 ? "" : ` (not a whole number of ${dtype})`
    return Result.fail(
      new PackedArrayError({
        field,
        expected: `${formatShape(shape)} ${dtype} = ${expectedBytes} bytes`,
        actual: `${data.byteLength}${ragged}`,
      }),
    )
  })
}

/**
 * Wire bytes of `values` (row-major over `shape`, default 1-D). On little-endian hosts `data`
 * aliases `values`' memory, so later writes to `values` show up in it.
 */
export const encode = <T extends PackedValues>(
  field: string,
  values: T,
  shape?: ReadonlyArray<number>,
): Effect.Effect<PackedArray<DtypeOf<T>>, PackedArrayError> =>
  Effect.suspend(() => Effect.fromResult(encodeResult(field, values, shape)))

/** {@link encode}, throwing {@link PackedArrayError}. */
export const encodeSync = <T extends PackedValues>(
  field: string,
  values: T,
  shape?: ReadonlyArray<number>,
): PackedArray<DtypeOf<T>> => Result.getOrThrow(encodeResult(field, values, shape))

/**
 * Checks `packed.data` against its dtype and shape and returns the elements. The result is a
 * view over `packed.data` when its offset is aligned (writes to one show in the other), else a
 * copy.
 */
export const decode = <D extends Dtype>(
  field: string,
  packed: PackedArray<D>,
): Effect.Effect<TypedArrayOf<D>, PackedArrayError> =>
  Effect.suspend(() => Effect.fromResult(decodeResult(field, packed)))

/** {@link decode}, throwing {@link PackedArrayError}. */
export const decodeSync = <D extends Dtype>(
  field: string,
  packed: PackedArray<D>,
): TypedArrayOf<D> => Result.getOrThrow(decodeResult(field, packed))
