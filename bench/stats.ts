/**
 * Intervals the experiment reports. Kept apart from the experiment so that they are tested
 * against hand values.
 */

/** Student's t quantile at 0.975 for n − 1 degrees of freedom (n ≤ 11; else the normal's). */
const T975 = [Number.NaN, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]

export const mean = (xs: ReadonlyArray<number>): number =>
  xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length)

/** The middle value (mean of the middle two for an even count); NaN for none. */
export const median = (xs: ReadonlyArray<number>): number => {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}

const sampleVariance = (xs: ReadonlyArray<number>): number => {
  const m = mean(xs)
  return xs.length < 2 ? 0 : xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1)
}

/** Student's t 95% interval of the mean of `xs` (a point when there are fewer than two). */
export const tInterval = (xs: ReadonlyArray<number>): [number, number] => {
  const m = mean(xs)
  if (xs.length < 2) return [m, m]
  const t = T975[xs.length - 1] ?? 1.96
  const h = (t * Math.sqrt(sampleVariance(xs))) / Math.sqrt(xs.length)
  return [m - h, m + h]
}

/** Wilson 95% interval of a binomial rate. */
export const wilson = (k: number, n: number): [number, number] => {
  if (n === 0) return [0, 1]
  const z = 1.96
  const p = k / n
  const d = 1 + (z * z) / n
  const c = p + (z * z) / (2 * n)
  const h = z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))
  return [Math.max(0, (c - h) / d), Math.min(1, (c + h) / d)]
}

/**
 * 95% interval of a paired gain measured on several strata (seeds), each with its own tasks:
 * `strata[s][i]` is task i's after − before rate in stratum s. The estimate is the mean over
 * strata of each stratum's mean gain (every seed weighs the same, as the headline means do);
 * its variance sums each stratum's sample variance of the mean, divided by the strata count
 * squared; the normal quantile (each stratum has tens of tasks). It answers "how sure is the
 * gain on these seeds, given which held-out tasks were drawn and how the episodes fell", not
 * "how would another seed's warm start fare" (tInterval over per-seed gains answers that).
 */
export const stratifiedPairedInterval = (
  strata: ReadonlyArray<ReadonlyArray<number>>,
): [number, number] => {
  const used = strata.filter((s) => s.length > 0)
  if (used.length === 0) return [0, 0]
  const m = mean(used.map(mean))
  const variance =
    used.reduce((a, s) => a + sampleVariance(s) / s.length, 0) / (used.length * used.length)
  const h = 1.96 * Math.sqrt(variance)
  return [m - h, m + h]
}
