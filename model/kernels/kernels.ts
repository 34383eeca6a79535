/**
 * The hot loops of the policy model, behind one interface so that the TypeScript reference and
 * the gpu.js backends are interchangeable and checked against each other.
 *
 * Every matrix is a flat row-major typed array. Outputs are written into `out` (allocated by the
 * caller, fully overwritten), so a forward pass allocates nothing the kernels could recycle.
 * Float64 arrays are accepted everywhere; backends that compute in f32 round them.
 */
export type Floats = Float32Array | Float64Array

export interface Kernels {
  /** Name shown in logs and benchmarks, e.g. `reference` or `gpu.js/webasm`. */
  readonly name: string
  /** out[m,n] = a[m,k] · b[k,n] */
  matmul(a: Floats, b: Floats, m: number, k: number, n: number, out: Floats): void
  /** out[m,n] = a[m,k] · b[n,k]ᵀ (gradient with respect to an input; attention scores) */
  matmulTransB(a: Floats, b: Floats, m: number, k: number, n: number, out: Floats): void
  /** out[m,n] = a[k,m]ᵀ · b[k,n] (gradient with respect to a weight) */
  matmulTransA(a: Floats, b: Floats, m: number, k: number, n: number, out: Floats): void
  /**
   * RMSNorm of each of `rows` rows of width `d`: out = x / rms(x) · gain, rms = sqrt(mean(x²) + eps).
   * Writes 1/rms of each row into `invRms` (the backward pass needs it).
   */
  rmsNorm(
    x: Floats,
    gain: Floats,
    rows: number,
    d: number,
    eps: number,
    out: Floats,
    invRms: Floats,
  ): void
  /** Row-wise log-softmax of `rows` rows of width `n`. */
  logSoftmaxRows(x: Floats, rows: number, n: number, out: Floats): void
  /**
   * Optional (the model falls back to plain loops): in place, row i of `rows` rows of `width`
   * keeps its first min(first + i + 1, width) entries as softmax(scale · x) and the rest become 0:
   * a causal tile of attention scores. A row's result must depend only on its own valid entries.
   */
  causalSoftmax?(x: Floats, rows: number, width: number, first: number, scale: number): void
  /** Optional: sig = 1 / (1 + e^−h) and act = h · sig for the first n values of h. */
  silu?(h: Floats, n: number, act: Floats, sig: Floats): void
}
