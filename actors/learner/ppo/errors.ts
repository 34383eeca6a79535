import { Data } from "effect"

/**
 * A PPO routine was given something it cannot use: arrays of different lengths, a target outside
 * the vocabulary, a non-finite input on a row that is used, or a hyperparameter out of range.
 * Raised before anything is computed. The message names the input or setting, e.g.
 * `values: 5 elements, rewards has 6`.
 */
export class PpoError extends Data.TaggedError("PpoError")<{
  /** The input or hyperparameter concerned. */
  readonly subject: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.subject}: ${this.reason}`
  }
}

export const fail = (subject: string, reason: string): never => {
  throw new PpoError({ subject, reason })
}

export const requireLength = (
  subject: string,
  array: ArrayLike<unknown>,
  expected: number,
  against: string,
): void => {
  if (array.length !== expected)
    fail(subject, `${array.length} elements, ${against} has ${expected}`)
}

export const requireFinite = (subject: string, x: number): void => {
  if (!Number.isFinite(x)) fail(subject, `must be finite, got ${x}`)
}

export const requireInRange = (subject: string, x: number, lo: number, hi: number): void => {
  if (!(x >= lo && x <= hi)) fail(subject, `must be in [${lo}, ${hi}], got ${x}`)
}

export const requireCount = (subject: string, x: number): void => {
  if (!(Number.isSafeInteger(x) && x >= 0))
    fail(subject, `must be a non-negative integer, got ${x}`)
}
