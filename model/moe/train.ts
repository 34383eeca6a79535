import { AdamW, type AdamWOptions } from "../optim/index.ts"
import { checkSequence, type SupervisedSequence, sequenceGradients } from "./gradients.ts"
import type { TinyMoe } from "./model.ts"
import { parallelGradients, resolveThreads, type Threads } from "./parallel.ts"
import { type Params, paramEntries } from "./params.ts"

export type { SupervisedSequence } from "./gradients.ts"

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

export interface GradientOptions {
  /**
   * Threads that compute the batch's sequences (this one included), data-parallel on worker
   * threads: a count, or `auto` (the default): $T1_MODEL_THREADS when set, else every core (at
   * most 4) when the batch is big enough to repay sending the weights (about 2·10⁸
   * multiply-adds, e.g. 2 sequences of 256 tokens at d_model 128), else 1. The result is the same
   * bit for bit for any count. Models whose kernels a worker cannot rebuild (anything but
   * reference, simd and the default auto) use 1.
   */
  readonly threads?: Threads
}

/**
 * Weighted next-token loss over a batch and its gradients (summed over sequences, in batch
 * order). The loss is Σ weights · −log p, so the caller sets the normalisation (e.g. 1 / total
 * loss tokens).
 */
export const supervisedGradients = (
  model: TinyMoe,
  batch: ReadonlyArray<SupervisedSequence>,
  auxLossCoef = 0,
  options: GradientOptions = {},
): { loss: number; auxLoss: number; grads: Params | undefined } => {
  for (const sequence of batch) checkSequence(sequence)
  const threads = resolveThreads(model, batch, options.threads)
  if (threads > 1) return parallelGradients(model, batch, auxLossCoef, threads)
  let loss = 0
  let auxLoss = 0
  let grads: Params | undefined
  for (const sequence of batch) {
    const r = sequenceGradients(model, sequence, auxLossCoef)
    loss += r.loss
    if (auxLossCoef) auxLoss += r.auxLoss
    if (grads) addGrads(model, grads, r.grads)
    else grads = r.grads
  }
  return { loss, auxLoss, grads }
}

/** One optimiser step on a supervised batch; returns the loss before the step. */
export const supervisedStep = (
  model: TinyMoe,
  optimizer: AdamW,
  batch: ReadonlyArray<SupervisedSequence>,
  options: { auxLossCoef?: number; lr?: number; threads?: Threads } = {},
): { loss: number; auxLoss: number; gradNorm: number } => {
  const { loss, auxLoss, grads } = supervisedGradients(
    model,
    batch,
    options.auxLossCoef ?? 0,
    options.threads !== undefined ? { threads: options.threads } : {},
  )
  if (!grads) return { loss, auxLoss, gradNorm: 0 }
  const named = new Map(paramEntries(model.config, grads).map((e) => [e.name, e.data]))
  const gradNorm = optimizer.step(named, options.lr)
  return { loss, auxLoss, gradNorm }
}
