import { Data } from "effect"

/**
 * The optimizer or learning-rate schedule was given something it cannot use: a hyperparameter out
 * of range, a gradient missing, unknown, the wrong length or not finite, or a state that does not
 * fit the parameters. Raised before anything is changed, so the parameters and moments are as
 * they were. The message names the parameter or setting, e.g.
 * `blocks.0.wq: gradient has 12 elements, the parameter has 16`.
 */
export class OptimizerError extends Data.TaggedError("OptimizerError")<{
  /** The parameter name, hyperparameter or state field concerned. */
  readonly subject: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.subject}: ${this.reason}`
  }
}
