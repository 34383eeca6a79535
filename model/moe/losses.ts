import type { Floats } from "../kernels/kernels.ts"
import { logprobOf, rowLogprob, rowNormaliserWithExps } from "../logprob.ts"

/** log p(targets[t] | logits row t) for each row, by a numerically stable log-sum-exp. */
export const tokenLogprobs = (
  logits: Floats,
  targets: ArrayLike<number>,
  vocab: number,
): Float64Array => {
  const out = new Float64Array(targets.length)
  for (let t = 0; t < targets.length; t++)
    out[t] = rowLogprob(logits, t * vocab, vocab, targets[t] as number)
  return out
}

/**
 * Weighted negative log-likelihood Σ_t w_t · −log p(target_t) and its gradient with respect to
 * the logits: w_t · (softmax − onehot). Rows without a target (t ≥ targets.length) get zero.
 * The caller chooses the normalisation through the weights (e.g. 1/number of loss tokens).
 */
export const weightedNll = (
  logits: Floats,
  targets: ArrayLike<number>,
  weights: ArrayLike<number>,
  vocab: number,
  rows: number,
): { loss: number; dLogits: Float64Array } => {
  const dLogits = new Float64Array(rows * vocab)
  const exps = new Float64Array(vocab)
  let loss = 0
  for (let t = 0; t < targets.length; t++) {
    const w = weights[t] as number
    if (w === 0) continue
    const o = t * vocab
    const z = rowNormaliserWithExps(logits, o, vocab, 1, exps)
    const target = targets[t] as number
    loss -= w * logprobOf(logits, o, target, 1, z)
    for (let j = 0; j < vocab; j++) dLogits[o + j] = (w * (exps[j] as number)) / z.sum
    dLogits[o + target] = (dLogits[o + target] as number) - w
  }
  return { loss, dLogits }
}
