import type { Floats } from "../kernels/kernels.ts"
import { weightedNll } from "./losses.ts"
import type { TinyMoe } from "./model.ts"
import type { Params } from "./params.ts"
import type { Routing } from "./routing.ts"

/** One sequence of a supervised batch: ids, and a weight per predicted token (0 = not trained). */
export interface SupervisedSequence {
  readonly ids: ArrayLike<number>
  /** weights[t] applies to predicting ids[t + 1] from position t; length ids.length − 1. */
  readonly weights: ArrayLike<number>
  /** Replay these expert choices (R3) instead of recomputing them. */
  readonly routing?: Routing
}

export const checkSequence = (sequence: SupervisedSequence): void => {
  const n = sequence.ids.length
  if (sequence.weights.length !== n - 1)
    throw new RangeError(`weights must have ${n - 1} entries, got ${sequence.weights.length}`)
}

/** Weighted next-token loss of one sequence, its load-balancing term, and their gradients. */
export const sequenceGradients = (
  model: TinyMoe,
  sequence: SupervisedSequence,
  auxLossCoef: number,
): { loss: number; auxLoss: number; grads: Params } => {
  checkSequence(sequence)
  const n = sequence.ids.length
  const result = model.score(sequence.ids, sequence.routing ? { replay: sequence.routing } : {})
  const tape = result.tape
  if (!tape) throw new Error("training forward kept no tape")
  const targets = Array.from({ length: n - 1 }, (_, t) => sequence.ids[t + 1] as number)
  const nll = weightedNll(result.logits, targets, sequence.weights, model.config.vocabSize, n)
  const auxLoss = auxLossCoef ? auxLossCoef * model.auxLoss(tape) : 0
  const grads = model.backward(tape, nll.dLogits, undefined, { auxLossCoef })
  return { loss: nll.loss, auxLoss, grads }
}

/** dst[k] += src[k], tensor by tensor (tensors in the same order). */
export const addArrays = (dst: ReadonlyArray<Floats>, src: ReadonlyArray<Floats>): void => {
  for (let k = 0; k < dst.length; k++) {
    const a = dst[k] as Floats
    const b = src[k] as Floats
    for (let i = 0; i < a.length; i++) a[i] = (a[i] as number) + (b[i] as number)
  }
}
