import type { Dtype } from "./dtype.ts"

/**
 * The wire form of a numeric array: little-endian element bytes, row-major over `shape`.
 * `data` is what goes into a protobuf `bytes` field; dtype and shape travel beside it (or are
 * implied by the field) so the receiver can check the bytes before trusting them.
 */
export interface PackedArray<D extends Dtype = Dtype> {
  readonly dtype: D
  readonly shape: ReadonlyArray<number>
  readonly data: Uint8Array
}
