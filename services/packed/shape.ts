import { Result } from "effect"
import { PackedArrayError } from "./errors.ts"

/** `4×2×2`; a rank-0 shape reads `scalar` (it holds one element, as in numpy). */
export const formatShape = (shape: ReadonlyArray<number>): string =>
  shape.length === 0 ? "scalar" : shape.join("×")

/**
 * Number of elements a row-major `shape` holds. Dims are checked here, not trusted, because
 * shapes arrive in the same untrusted message as the bytes they describe.
 */
export const elementCount = (
  field: string,
  shape: ReadonlyArray<number>,
): Result.Result<number, PackedArrayError> => {
  let count = 1
  for (const dim of shape) {
    if (!Number.isSafeInteger(dim) || dim < 0) {
      return Result.fail(
        new PackedArrayError({
          field,
          expected: "a shape of non-negative integers",
          actual: `[${shape.join(", ")}]`,
        }),
      )
    }
    count *= dim
  }
  if (!Number.isSafeInteger(count)) {
    return Result.fail(
      new PackedArrayError({
        field,
        expected: "a shape whose element count is a safe integer",
        actual: formatShape(shape),
      }),
    )
  }
  return Result.succeed(count)
}

/** Row-major coordinates of flat element `index`, for error messages. */
export const coordinatesOf = (index: number, shape: ReadonlyArray<number>): Array<number> => {
  const coords = new Array<number>(shape.length).fill(0)
  let rest = index
  for (let axis = shape.length - 1; axis >= 0; axis--) {
    const dim = shape[axis] ?? 1
    coords[axis] = rest % dim
    rest = Math.floor(rest / dim)
  }
  return coords
}
