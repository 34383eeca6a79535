import { Data } from "effect"

/**
 * A safetensors file (or a tensor map about to be written as one) that this module refuses. The
 * message names the file when there is one, the tensor or header field, and what was wrong, e.g.
 * `ckpt.safetensors: tensor "blocks.0.wq" data_offsets: shape [4,4] F32 needs 64 bytes, data_offsets [0,60] span 60`.
 */
export class SafetensorsError extends Data.TaggedError("SafetensorsError")<{
  /** The tensor name and field, or the part of the file (`header length`, `header JSON`). */
  readonly field: string
  readonly reason: string
  /** The file, when the bytes came from or were going to one. */
  readonly path?: string
}> {
  override get message(): string {
    return `${this.path ?? "safetensors"}: ${this.field}: ${this.reason}`
  }
}
