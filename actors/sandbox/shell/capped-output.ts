/** The text put between the kept head and tail when output is over its cap. */
export const truncationMarker = (droppedBytes: number): string =>
  `\n[... t1: ${droppedBytes} bytes truncated ...]\n`

/** Bytes a head starts with; it doubles as output arrives, up to half the limit. */
const INITIAL_HEAD_BYTES = 4096

/**
 * Keeps the first half and the last half of `limit` bytes of a stream, whatever its length, and
 * counts the rest. Memory stays O(limit); each append copies at most `limit` bytes. Storage is
 * taken as output arrives, not up front: most commands print little, and zero-filling a
 * limit-sized buffer per command (up to megabytes for a verifier's reads) was a measurable part of
 * a sandbox host's time.
 */
export class CappedOutput {
  #head: Uint8Array
  readonly #headSize: number
  #headLength = 0
  /** A ring: the last `tailSize` bytes seen after the head filled, oldest at `tailStart`. */
  #tail: Uint8Array = new Uint8Array(0)
  readonly #tailSize: number
  #tailStart = 0
  #tailLength = 0
  #total = 0

  constructor(readonly limit: number) {
    this.#headSize = Math.floor(limit / 2)
    this.#tailSize = limit - this.#headSize
    this.#head = new Uint8Array(Math.min(this.#headSize, INITIAL_HEAD_BYTES))
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
    if (this.#headLength < this.#headSize) {
      const n = Math.min(rest.length, this.#headSize - this.#headLength)
      if (this.#headLength + n > this.#head.length) {
        const grown = new Uint8Array(
          Math.min(this.#headSize, Math.max(this.#headLength + n, this.#head.length * 2)),
        )
        grown.set(this.#head.subarray(0, this.#headLength))
        this.#head = grown
      }
      this.#head.set(rest.subarray(0, n), this.#headLength)
      this.#headLength += n
      rest = rest.subarray(n)
    }
    const size = this.#tailSize
    if (rest.length === 0 || size === 0) return
    if (this.#tail.length === 0) this.#tail = new Uint8Array(size)
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
