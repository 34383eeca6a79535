/**
 * The one log-softmax of the project. The sampler's recorded log-probs, the learner's
 * recomputation and every metric that compares them come from these functions, with the same
 * arithmetic in the same order, so train/infer differences measure the model, not the code.
 *
 * A row is `x[o .. o + n)`, scaled by `invT` (1 / temperature; 1 for the policy itself), in f64.
 * log p(id) = x[id]·invT − zMax − log Σ_j exp(x[j]·invT − zMax), with zMax = max_j x[j] · invT.
 */

type Row = ArrayLike<number>

/** The largest element of a row (unscaled; NaN elements are skipped). */
export const rowMax = (x: Row, o: number, n: number): number => {
  let max = Number.NEGATIVE_INFINITY
  for (let j = 0; j < n; j++) {
    const v = x[o + j] as number
    if (v > max) max = v
  }
  return max
}

/** A row's normaliser: `zMax` and `logSum` = log Σ exp(x·invT − zMax); lse = zMax + logSum. */
export interface RowNormaliser {
  readonly zMax: number
  readonly logSum: number
  readonly sum: number
}

const normaliser = (
  x: Row,
  o: number,
  n: number,
  invT: number,
  max: number,
  exps: Float64Array | undefined,
): RowNormaliser => {
  const zMax = max * invT
  let sum = 0
  for (let j = 0; j < n; j++) {
    const e = Math.exp((x[o + j] as number) * invT - zMax)
    if (exps !== undefined) exps[j] = e
    sum += e
  }
  return { zMax, logSum: Math.log(sum), sum }
}

/** The row's normaliser; `max` may be passed when the caller has it (it must be the row max). */
export const rowNormaliser = (
  x: Row,
  o: number,
  n: number,
  invT = 1,
  max = rowMax(x, o, n),
): RowNormaliser => normaliser(x, o, n, invT, max, undefined)

/**
 * The row's normaliser, with exp(x·invT − zMax) written into `exps[0 .. n)` for a gradient or an
 * entropy that needs the probabilities (exps[j] / sum).
 */
export const rowNormaliserWithExps = (
  x: Row,
  o: number,
  n: number,
  invT: number,
  exps: Float64Array,
): RowNormaliser => normaliser(x, o, n, invT, rowMax(x, o, n), exps)

/** log p(id) under a row's normaliser. */
export const logprobOf = (x: Row, o: number, id: number, invT: number, z: RowNormaliser): number =>
  (x[o + id] as number) * invT - z.zMax - z.logSum

/** log softmax(x[o..o+n) · invT)[id]. */
export const rowLogprob = (x: Row, o: number, n: number, id: number, invT = 1): number =>
  logprobOf(x, o, id, invT, rowNormaliser(x, o, n, invT))
