/** The text put between the kept head and tail when output is over its cap. */
export const truncationMarker = (droppedBytes: number): string =>
  `\n[... t1: ${droppedBytes} bytes truncated ...]\n`

/**
 * Keeps the first half and the last half of `limit` bytes of a stream, whatever its length, and
 * counts the rest. Memory stays O(limit); each append copies at most `limit` bytes.
 */
export class CappedOutput {
  readonly #head: Uint8Array
  #headLength = 0
  /** A ring: the last `tail.length` bytes seen after the head filled, oldest at `tailStart`. */
  readonly #tail: Uint8Array
  #tailStart = 0
  #tailLength = 0
  #total = 0

  constructor(readonly limit: number) {
    const headSize = Math.floor(limit / 2)
    this.#head = new Uint8Array(headSize)
    this.#tail = new Uint8Array(limit - headSize)
  }

  /** Bytes appended in all. */
  get totalBytes(): number {
    return this.#total
  }

  get truncated(): boolean {
    return this.#total > this.limit
  }

  append(bytes: Uint8Array): void {
    this.#total += bytes.length
    let rest = bytes
    if (this.#headLength < this.#head.length) {
      const n = Math.min(rest.length, this.#head.length - this.#headLength)
      this.#head.set(rest.subarray(0, n), this.#headLength)
      this.#headLength += n
      rest = rest.subarray(n)
    }
    const size = this.#tail.length
    if (rest.length === 0 || size === 0) return
    if (rest.length >= size) {
      this.#tail.set(rest.subarray(rest.length - size))
      this.#tailStart = 0
      this.#tailLength = size
      return
    }
    // Write after the newest byte, wrapping; drop the oldest when full.
    let writeAt = (this.#tailStart + this.#tailLength) % size
    const first = Math.min(rest.length, size - writeAt)
    this.#tail.set(rest.subarray(0, first), writeAt)
    this.#tail.set(rest.subarray(first), 0)
    writeAt = (writeAt + rest.length) % size
    const length = this.#tailLength + rest.length
    if (length > size) {
      this.#tailLength = size
      this.#tailStart = writeAt
    } else {
      this.#tailLength = length
    }
  }

  /** The kept bytes: everything when under the cap, else head + marker + tail. */
  bytes(): Uint8Array {
    const dropped = this.#total - this.#headLength - this.#tailLength
    const marker = dropped > 0 ? new TextEncoder().encode(truncationMarker(dropped)) : undefined
    const out = new Uint8Array(this.#headLength + (marker?.length ?? 0) + this.#tailLength)
    out.set(this.#head.subarray(0, this.#headLength))
    let at = this.#headLength
    if (marker !== undefined) {
      out.set(marker, at)
      at += marker.length
    }
    const size = this.#tail.length
    const first = Math.min(this.#tailLength, size - this.#tailStart)
    out.set(this.#tail.subarray(this.#tailStart, this.#tailStart + first), at)
    out.set(this.#tail.subarray(0, this.#tailLength - first), at + first)
    return out
  }
}
