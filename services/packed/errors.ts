import { Data } from "effect"

/**
 * A packed array did not match what its message promised (shape, dtype, byte length or value
 * range). The message always names the field and both sides, e.g.
 * `routing: expected 4×2×2 uint8 = 16 bytes, got 15`, because the bytes usually come from
 * another process and the log line is all the receiver will have to go on.
 */
export class PackedArrayError extends Data.TaggedError("PackedArrayError")<{
  readonly field: string
  readonly expected: string
  readonly actual: string
}> {
  override get message(): string {
    return `${this.field}: expected ${this.expected}, got ${this.actual}`
  }
}
