/**
 * Byte buffers lent for encoding and given back once nothing references their bytes any more.
 * Reusing one spares a fresh allocation per message: for megabyte trajectory chunks that is page
 * faults, zero-filling and the external-memory garbage collections they bring (bench:stream).
 */
export class BufferPool {
  private readonly free: Uint8Array[] = []
  private freeBytes = 0

  /** `maxFreeBytes`: buffers given back beyond this many bytes are left to the collector. */
  constructor(private readonly maxFreeBytes: number) {}

  /** A buffer of at least `size` bytes (its contents are whatever was written last). */
  take(size: number): Uint8Array {
    for (let i = this.free.length - 1; i >= 0; i--) {
      const b = this.free[i] as Uint8Array
      if (b.length < size) continue
      this.free.splice(i, 1)
      this.freeBytes -= b.length
      return b
    }
    return new Uint8Array(size)
  }

  /** Takes a buffer back; the caller must not touch it (or any view of it) afterwards. */
  give(buffer: Uint8Array): void {
    if (this.freeBytes + buffer.length > this.maxFreeBytes) return
    this.free.push(buffer)
    this.freeBytes += buffer.length
  }

  /** Bytes held for reuse. */
  get held(): number {
    return this.freeBytes
  }
}
