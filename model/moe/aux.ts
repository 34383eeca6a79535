import type { Floats } from "../kernels/kernels.ts"

/**
 * Switch-Transformer load-balancing loss of one layer: E · Σ_e f_e · P_e, with f_e the share of
 * (row, slot) assignments that went to expert e (not differentiable) and P_e the mean full-softmax
 * router probability of e. Minimal (1) when load and probability are uniform.
 */
export const loadBalancingLoss = (
  routerLogits: Floats,
  experts: Int32Array,
  rows: number,
  nExperts: number,
  topK: number,
): { loss: number; probs: Float64Array; share: Float64Array } => {
  const share = new Float64Array(nExperts)
  for (let i = 0; i < rows * topK; i++)
    share[experts[i] as number] = (share[experts[i] as number] as number) + 1 / (rows * topK)
  const probs = new Float64Array(rows * nExperts)
  const mean = new Float64Array(nExperts)
  for (let r = 0; r < rows; r++) {
    let max = Number.NEGATIVE_INFINITY
    for (let e = 0; e < nExperts; e++) max = Math.max(max, routerLogits[r * nExperts + e] as number)
    let sum = 0
    for (let e = 0; e < nExperts; e++) {
      const v = Math.exp((routerLogits[r * nExperts + e] as number) - max)
      probs[r * nExperts + e] = v
      sum += v
    }
    for (let e = 0; e < nExperts; e++) {
      const v = (probs[r * nExperts + e] as number) / sum
      probs[r * nExperts + e] = v
      mean[e] = (mean[e] as number) + v / rows
    }
  }
  let loss = 0
  for (let e = 0; e < nExperts; e++) loss += (share[e] as number) * (mean[e] as number)
  return { loss: nExperts * loss, probs, share }
}

/** Adds coef · ∂(load-balancing loss)/∂(router logits) into `dLogits`. */
export const addLoadBalancingGrad = (
  routerLogits: Floats,
  experts: Int32Array,
  rows: number,
  nExperts: number,
  topK: number,
  coef: number,
  dLogits: Floats,
): void => {
  const { probs, share } = loadBalancingLoss(routerLogits, experts, rows, nExperts, topK)
  const c = (coef * nExperts) / rows
  for (let r = 0; r < rows; r++) {
    let dot = 0
    for (let e = 0; e < nExperts; e++)
      dot += (share[e] as number) * (probs[r * nExperts + e] as number)
    for (let e = 0; e < nExperts; e++) {
      const i = r * nExperts + e
      dLogits[i] = (dLogits[i] as number) + c * (probs[i] as number) * ((share[e] as number) - dot)
    }
  }
}
