/**
 * A PPO routine was given something it cannot use: arrays of different lengths, a target outside
 * the vocabulary, a non-finite input on a row that is used, or a hyperparameter out of range.
 * Raised before anything is computed. The message names the input or setting, e.g.
 * `values: 5 elements, rewards has 6`.
 *
 * A broken precondition of pure math, thrown like a RangeError: a defect, never an outcome to
 * catch. What run time can produce (non-finite logits from diverged weights, a sampler's NaN
 * log-prob) the trainer checks before it calls, and reports as a skipped minibatch or a dropped
 * trajectory; what can fail at run time in the learner travels in Effect's error channel as
 * tagged errors (TrajectoryMalformed, WeightsUnavailable, ...).
 */
export class PpoError extends Error {
  override readonly name = "PpoError"
  constructor(
    /** The input or hyperparameter concerned. */
    readonly subject: string,
    readonly reason: string,
  ) {
    super(`${subject}: ${reason}`)
  }
}

export const fail = (subject: string, reason: string): never => {
  throw new PpoError(subject, reason)
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
