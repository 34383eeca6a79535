import type { Floats } from "../kernels/kernels.ts"

/** Expert ids per processed position, row-major [positions, layers, top_k] (the contract's layout). */
export type Routing = Uint8Array | Uint16Array

export const allocRouting = (
  positions: number,
  layers: number,
  topK: number,
  nExperts: number,
): Routing =>
  nExperts <= 256
    ? new Uint8Array(positions * layers * topK)
    : new Uint16Array(positions * layers * topK)

/**
 * The k largest router logits of one row, largest first; ties go to the lower expert id so the
 * choice is a pure function of the logits.
 */
export const selectTopK = (
  logits: Floats,
  offset: number,
  nExperts: number,
  k: number,
  out: Int32Array,
): void => {
  for (let s = 0; s < k; s++) out[s] = -1
  for (let e = 0; e < nExperts; e++) {
    const v = logits[offset + e] as number
    let s = k - 1
    const last = out[s] as number
    if (last !== -1 && !(v > (logits[offset + last] as number))) continue
    while (s > 0) {
      const prev = out[s - 1] as number
      if (prev !== -1 && !(v > (logits[offset + prev] as number))) break
      out[s] = prev
      s--
    }
    out[s] = e
  }
}

/** Softmax over the router logits of the selected experts only (the gate weights). */
export const selectedGates = (
  logits: Floats,
  offset: number,
  experts: Int32Array,
  k: number,
  out: Float64Array,
): void => {
  let max = Number.NEGATIVE_INFINITY
  for (let s = 0; s < k; s++) max = Math.max(max, logits[offset + (experts[s] as number)] as number)
  let sum = 0
  for (let s = 0; s < k; s++) {
    const g = Math.exp((logits[offset + (experts[s] as number)] as number) - max)
    out[s] = g
    sum += g
  }
  for (let s = 0; s < k; s++) out[s] = (out[s] as number) / sum
}
