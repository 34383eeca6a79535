import type { Floats } from "../kernels/kernels.ts"

/** log p(targets[t] | logits row t) for each row, by a numerically stable log-sum-exp. */
export const tokenLogprobs = (
  logits: Floats,
  targets: ArrayLike<number>,
  vocab: number,
): Float64Array => {
  const out = new Float64Array(targets.length)
  for (let t = 0; t < targets.length; t++) {
    const o = t * vocab
    let max = Number.NEGATIVE_INFINITY
    for (let j = 0; j < vocab; j++) max = Math.max(max, logits[o + j] as number)
    let sum = 0
    for (let j = 0; j < vocab; j++) sum += Math.exp((logits[o + j] as number) - max)
    out[t] = (logits[o + (targets[t] as number)] as number) - max - Math.log(sum)
  }
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
  let loss = 0
  for (let t = 0; t < targets.length; t++) {
    const w = weights[t] as number
    if (w === 0) continue
    const o = t * vocab
    let max = Number.NEGATIVE_INFINITY
    for (let j = 0; j < vocab; j++) max = Math.max(max, logits[o + j] as number)
    let sum = 0
    for (let j = 0; j < vocab; j++) {
      const e = Math.exp((logits[o + j] as number) - max)
      dLogits[o + j] = e
      sum += e
    }
    const target = targets[t] as number
    loss -= w * ((logits[o + target] as number) - max - Math.log(sum))
    for (let j = 0; j < vocab; j++) dLogits[o + j] = (w * (dLogits[o + j] as number)) / sum
    dLogits[o + target] = (dLogits[o + target] as number) - w
  }
  return { loss, dLogits }
}
