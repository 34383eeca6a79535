import { AdamW, type AdamWOptions } from "../optim/index.ts"
import { weightedNll } from "./losses.ts"
import type { TinyMoe } from "./model.ts"
import { type Params, paramEntries } from "./params.ts"
import type { Routing } from "./routing.ts"

/** One sequence of a supervised batch: ids, and a weight per predicted token (0 = not trained). */
export interface SupervisedSequence {
  readonly ids: ArrayLike<number>
  /** weights[t] applies to predicting ids[t + 1] from position t; length ids.length − 1. */
  readonly weights: ArrayLike<number>
  /** Replay these expert choices (R3) instead of recomputing them. */
  readonly routing?: Routing
}

export const optimizerFor = (model: TinyMoe, options: AdamWOptions): AdamW =>
  new AdamW(
    options,
    model.entries().map((e) => ({ name: e.name, data: e.data, decay: e.decay })),
  )

/** Adds `src` into `dst` tensor by tensor. */
export const addGrads = (model: TinyMoe, dst: Params, src: Params): void => {
  const a = paramEntries(model.config, dst)
  const b = paramEntries(model.config, src)
  a.forEach((entry, k) => {
    const from = (b[k] as (typeof b)[number]).data
    for (let i = 0; i < entry.data.length; i++)
      entry.data[i] = (entry.data[i] as number) + (from[i] as number)
  })
}

/**
 * Weighted next-token loss over a batch and its gradients (summed over sequences). The loss is
 * Σ weights · −log p, so the caller sets the normalisation (e.g. 1 / total loss tokens).
 */
export const supervisedGradients = (
  model: TinyMoe,
  batch: ReadonlyArray<SupervisedSequence>,
  auxLossCoef = 0,
): { loss: number; auxLoss: number; grads: Params | undefined } => {
  let loss = 0
  let auxLoss = 0
  let grads: Params | undefined
  for (const sequence of batch) {
    const n = sequence.ids.length
    if (sequence.weights.length !== n - 1)
      throw new RangeError(`weights must have ${n - 1} entries, got ${sequence.weights.length}`)
    const result = model.score(sequence.ids, sequence.routing ? { replay: sequence.routing } : {})
    const tape = result.tape
    if (!tape) throw new Error("training forward kept no tape")
    const targets = Array.from({ length: n - 1 }, (_, t) => sequence.ids[t + 1] as number)
    const nll = weightedNll(result.logits, targets, sequence.weights, model.config.vocabSize, n)
    loss += nll.loss
    if (auxLossCoef) auxLoss += auxLossCoef * model.auxLoss(tape)
    const g = model.backward(tape, nll.dLogits, undefined, { auxLossCoef })
    if (grads) addGrads(model, grads, g)
    else grads = g
  }
  return { loss, auxLoss, grads }
}

/** One optimiser step on a supervised batch; returns the loss before the step. */
export const supervisedStep = (
  model: TinyMoe,
  optimizer: AdamW,
  batch: ReadonlyArray<SupervisedSequence>,
  options: { auxLossCoef?: number; lr?: number } = {},
): { loss: number; auxLoss: number; gradNorm: number } => {
  const { loss, auxLoss, grads } = supervisedGradients(model, batch, options.auxLossCoef ?? 0)
  if (!grads) return { loss, auxLoss, gradNorm: 0 }
  const named = new Map(paramEntries(model.config, grads).map((e) => [e.name, e.data]))
  const gradNorm = optimizer.step(named, options.lr)
  return { loss, auxLoss, gradNorm }
}
