import { Data } from "effect"

/**
 * Sampling settings or logits that cannot be sampled from: a negative temperature, top-p outside
 * (0, 1], a top-k that is not a positive integer, NaN or +Infinity logits, an empty stop
 * sequence. The message names the field, e.g. `logits[17]: is NaN`.
 */
export class SamplingError extends Data.TaggedError("SamplingError")<{
  readonly field: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.field}: ${this.reason}`
  }
}
