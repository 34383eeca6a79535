import { logprobOf, rowNormaliser } from "../logprob.ts"
import type { Floats, Kernels } from "./kernels.ts"

/**
 * Plain TypeScript kernels: the definition every other backend is tested against. Loop orders are
 * chosen for sequential memory access (i-k-j), and each output cell accumulates in a fixed order
 * that does not depend on how many rows are computed together, so a row's result is the same in
 * a batched prefill and in a single decode step.
 */
export const referenceKernels: Kernels = {
  name: "reference",

  matmul(a, b, m, k, n, out) {
    out.fill(0, 0, m * n)
    for (let i = 0; i < m; i++) {
      const ai = i * k
      const oi = i * n
      for (let p = 0; p < k; p++) {
        const av = a[ai + p] as number
        if (av === 0) continue
        const bp = p * n
        for (let j = 0; j < n; j++)
          out[oi + j] = (out[oi + j] as number) + av * (b[bp + j] as number)
      }
    }
  },

  matmulTransB(a, b, m, k, n, out) {
    for (let i = 0; i < m; i++) {
      const ai = i * k
      for (let j = 0; j < n; j++) {
        const bj = j * k
        let s = 0
        for (let p = 0; p < k; p++) s += (a[ai + p] as number) * (b[bj + p] as number)
        out[i * n + j] = s
      }
    }
  },

  matmulTransA(a, b, m, k, n, out) {
    out.fill(0, 0, m * n)
    for (let p = 0; p < k; p++) {
      const ap = p * m
      const bp = p * n
      for (let i = 0; i < m; i++) {
        const av = a[ap + i] as number
        if (av === 0) continue
        const oi = i * n
        for (let j = 0; j < n; j++)
          out[oi + j] = (out[oi + j] as number) + av * (b[bp + j] as number)
      }
    }
  },

  rmsNorm(x, gain, rows, d, eps, out, invRms) {
    for (let r = 0; r < rows; r++) {
      const o = r * d
      let ss = 0
      for (let j = 0; j < d; j++) {
        const v = x[o + j] as number
        ss += v * v
      }
      const inv = 1 / Math.sqrt(ss / d + eps)
      invRms[r] = inv
      for (let j = 0; j < d; j++) out[o + j] = (x[o + j] as number) * inv * (gain[j] as number)
    }
  },

  logSoftmaxRows(x, rows, n, out) {
    for (let r = 0; r < rows; r++) {
      const o = r * n
      const z = rowNormaliser(x, o, n)
      for (let j = 0; j < n; j++) out[o + j] = logprobOf(x, o, j, 1, z)
    }
  },
}

/** Kernels.causalSoftmax in plain loops (f64 arithmetic); the model's fallback. */
export const jsCausalSoftmax = (
  s: Floats,
  rows: number,
  width: number,
  first: number,
  scale: number,
): void => {
  for (let i = 0; i < rows; i++) {
    const o = i * width
    const valid = Math.min(first + i + 1, width)
    let max = Number.NEGATIVE_INFINITY
    for (let j = 0; j < valid; j++) {
      const v = (s[o + j] as number) * scale
      if (v > max) max = v
    }
    let sum = 0
    for (let j = 0; j < valid; j++) {
      const e = Math.exp((s[o + j] as number) * scale - max)
      s[o + j] = e
      sum += e
    }
    const inv = 1 / sum
    for (let j = 0; j < valid; j++) s[o + j] = (s[o + j] as number) * inv
    for (let j = valid; j < width; j++) s[o + j] = 0
  }
}

/** Kernels.silu in plain loops; the model's fallback. */
export const jsSilu = (h: Floats, n: number, act: Floats, sig: Floats): void => {
  for (let i = 0; i < n; i++) {
    const x = h[i] as number
    const s = 1 / (1 + Math.exp(-x))
    sig[i] = s
    act[i] = x * s
  }
}

export type { Floats }
