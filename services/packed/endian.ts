import type { Dtype, PackedValues, TypedArrayOf } from "./dtype.ts"
import { BYTES_PER_ELEMENT, viewAs } from "./dtype.ts"

export const HOST_IS_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1

/**
 * A copy of `bytes` with every `width`-byte element reversed. A pure byte permutation, so
 * float32 NaN payloads survive (going through a JS number could canonicalise them).
 */
export const swapByteOrder = (bytes: Uint8Array, width: number): Uint8Array<ArrayBuffer> => {
  const out = new Uint8Array(bytes.byteLength)
  for (let element = 0; element < bytes.byteLength; element += width) {
    for (let k = 0; k < width; k++) out[element + k] = bytes[element + width - 1 - k] ?? 0
  }
  return out
}

/** Wire bytes of `values`: a view over the same memory on little-endian hosts, else a copy. */
export const toLittleEndian = (
  values: PackedValues,
  width: number,
  hostIsLittleEndian = HOST_IS_LITTLE_ENDIAN,
): Uint8Array => {
  const native = new Uint8Array(values.buffer, values.byteOffset, values.byteLength)
  return hostIsLittleEndian ? native : swapByteOrder(native, width)
}

/**
 * Typed array over wire bytes whose length was already checked. A view when the host is
 * little-endian and the offset is aligned; otherwise a copy, since typed arrays cannot start at
 * an unaligned offset and protobuf decoders hand out subarrays at arbitrary ones.
 */
export const fromLittleEndian = <D extends Dtype>(
  bytes: Uint8Array,
  dtype: D,
  hostIsLittleEndian = HOST_IS_LITTLE_ENDIAN,
): TypedArrayOf<D> => {
  const width = BYTES_PER_ELEMENT[dtype]
  const length = bytes.byteLength / width
  if (!hostIsLittleEndian) return viewAs(dtype, swapByteOrder(bytes, width).buffer, 0, length)
  if (bytes.byteOffset % width === 0) return viewAs(dtype, bytes.buffer, bytes.byteOffset, length)
  // A copy that owns its buffer: a Node Buffer's .slice() would be a view into its pool.
  return viewAs(dtype, new Uint8Array(bytes).buffer, 0, length)
}
