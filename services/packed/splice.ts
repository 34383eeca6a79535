/**
 * Protobuf framing for messages whose bulk is a few large `bytes` fields: the small fields are
 * encoded by the generated code, the large ones appended as (tag, length, bytes) with one copy
 * each into one buffer of the exact size. Valid protobuf — a parser accepts fields in any order
 * and the result decodes to the same message — and about three times cheaper than letting the
 * generic writer grow and join its buffers for a megabyte of payload.
 */

const varintSize = (n: number): number => {
  let size = 1
  while (n >= 0x80) {
    n = Math.floor(n / 128)
    size++
  }
  return size
}

const writeVarint = (out: Uint8Array, at: number, n: number): number => {
  while (n >= 0x80) {
    out[at++] = (n & 0x7f) | 0x80
    n = Math.floor(n / 128)
  }
  out[at++] = n
  return at
}

/** Wire type 2: length-delimited. */
const tagOf = (field: number) => field * 8 + 2

/** A large field's bytes: one array, or parts written one after another (a chunked array). */
export type BytesField = Uint8Array | ReadonlyArray<Uint8Array>

const lengthOf = (bytes: BytesField): number => {
  if (bytes instanceof Uint8Array) return bytes.length
  let n = 0
  for (const part of bytes) n += part.length
  return n
}

/**
 * `head` (an encoded message without the large fields) followed by each non-empty large field;
 * with `wrapIn`, the whole is itself a length-delimited field of that number in an outer message
 * that has no other field set (a oneof member, as TrajectoryRecord.chunk). A field given as parts
 * is written as their concatenation, so a chunked array is joined by this one copy.
 */
export const spliceBytesFields = (
  head: Uint8Array,
  fields: ReadonlyArray<readonly [field: number, bytes: BytesField]>,
  wrapIn?: number,
  into?: Uint8Array,
): Uint8Array => {
  let inner = head.length
  for (const [field, bytes] of fields) {
    const n = lengthOf(bytes)
    if (n > 0) inner += varintSize(tagOf(field)) + varintSize(n) + n
  }
  const outerHead = wrapIn === undefined ? 0 : varintSize(tagOf(wrapIn)) + varintSize(inner)
  const size = outerHead + inner
  const out =
    into !== undefined && into.length >= size ? into.subarray(0, size) : new Uint8Array(size)
  let at = 0
  if (wrapIn !== undefined) {
    at = writeVarint(out, at, tagOf(wrapIn))
    at = writeVarint(out, at, inner)
  }
  out.set(head, at)
  at += head.length
  for (const [field, bytes] of fields) {
    const n = lengthOf(bytes)
    if (n === 0) continue
    at = writeVarint(out, at, tagOf(field))
    at = writeVarint(out, at, n)
    for (const part of bytes instanceof Uint8Array ? [bytes] : bytes) {
      out.set(part, at)
      at += part.length
    }
  }
  return out
}
