/** Learner metrics (see TrainStepReport in proto/t1/v1/learner.proto). */

import { fail, requireLength } from "./errors.ts"

export interface LogprobSample {
  /** Per row: the learner's log-prob of the target (at the sampler's temperature). */
  readonly learner: ArrayLike<number>
  /** Per row: the sampler's log-prob of the same target. */
  readonly sampler: ArrayLike<number>
  /** Per row: ≠ 0 where the row is an action row (only those are compared). */
  readonly action: ArrayLike<number>
}

const checkSample = (s: LogprobSample, i: number): void => {
  requireLength(`samples[${i}].sampler`, s.sampler, s.learner.length, "learner")
  requireLength(`samples[${i}].action`, s.action, s.learner.length, "learner")
}

/**
 * Mean over samples of the mean over the sample's action rows of |learner − sampler| (nats):
 * how far the learner's log-probs are from those the sampler reported for the same tokens
 * (TITO and routing replay bring it down). Samples without action rows are skipped; 0 when
 * no sample has one.
 */
export const trainInferLogprobAbsDiff = (samples: ReadonlyArray<LogprobSample>): number => {
  let total = 0
  let counted = 0
  samples.forEach((s, i) => {
    checkSample(s, i)
    let sum = 0
    let n = 0
    for (let r = 0; r < s.learner.length; r++) {
      if ((s.action[r] as number) === 0) continue
      sum += Math.abs((s.learner[r] as number) - (s.sampler[r] as number))
      n++
    }
    if (n === 0) return
    total += sum / n
    counted++
  })
  return counted === 0 ? 0 : total / counted
}

/**
 * Mean over all action rows of all samples (pooled, each token weighs the same) of the k3
 * estimator (ρ − 1) − log ρ, ρ = exp(learner − sampler) = π_learner / π_sampler at the sampled
 * token. The tokens were drawn from the sampler, and E_sampler[ρ] = 1 while E_sampler[−log ρ]
 * = KL(sampler ‖ learner), so this is an unbiased estimate of that KL per token; every term is
 * ≥ 0 (x − 1 ≥ log x). (Unbiased as long as the sampler's support is the learner's: with top-p
 * or top-k filtering the sampler's reported log-probs are those before filtering.) 0 when there
 * are no action rows.
 */
export const mismatchKlK3 = (samples: ReadonlyArray<LogprobSample>): number => {
  let sum = 0
  let n = 0
  samples.forEach((s, i) => {
    checkSample(s, i)
    for (let r = 0; r < s.learner.length; r++) {
      if ((s.action[r] as number) === 0) continue
      const logRho = (s.learner[r] as number) - (s.sampler[r] as number)
      sum += Math.exp(logRho) - 1 - logRho
      n++
    }
  })
  return n === 0 ? 0 : sum / n
}

/**
 * 1 − Var(G − V) / Var(G) over the rows with mask ≠ 0 (every row without a mask), population
 * variances: 1 = the critic predicts the returns exactly, 0 = no better than their mean, < 0 =
 * worse. 0 when there are no rows or Var(G) = 0 (the ratio is undefined).
 */
export const explainedVariance = (
  values: ArrayLike<number>,
  returns: ArrayLike<number>,
  mask?: ArrayLike<number>,
): number => {
  requireLength("returns", returns, values.length, "values")
  if (mask !== undefined) requireLength("mask", mask, values.length, "values")
  let n = 0
  let sumG = 0
  let sumE = 0
  for (let r = 0; r < values.length; r++) {
    if (mask !== undefined && (mask[r] as number) === 0) continue
    const g = returns[r] as number
    n++
    sumG += g
    sumE += g - (values[r] as number)
  }
  if (n === 0) return 0
  const meanG = sumG / n
  const meanE = sumE / n
  let varG = 0
  let varE = 0
  for (let r = 0; r < values.length; r++) {
    if (mask !== undefined && (mask[r] as number) === 0) continue
    const g = returns[r] as number
    const dg = g - meanG
    const de = g - (values[r] as number) - meanE
    varG += dg * dg
    varE += de * de
  }
  if (!(varG > 0)) return 0
  return 1 - varE / varG
}

/** Arithmetic mean; 0 for an empty input. */
export const mean = (xs: ArrayLike<number>): number => {
  if (xs.length === 0) return 0
  let sum = 0
  for (let i = 0; i < xs.length; i++) sum += xs[i] as number
  return sum / xs.length
}

/** Fraction of episodes resolved (every counted test passed); 0 for an empty batch. */
export const resolvedRate = (episodes: ReadonlyArray<{ readonly resolved: boolean }>): number => {
  if (episodes.length === 0) return 0
  let n = 0
  for (const e of episodes) if (e.resolved) n++
  return n / episodes.length
}

/**
 * Mean over trajectories of policyVersion − admittedVersion (Batch.staleness_mean); 0 for an
 * empty batch. A negative lag (admitted by a newer policy than the learner's) is an error.
 */
export const stalenessMean = (
  policyVersion: number,
  admittedVersions: ArrayLike<number>,
): number => {
  let sum = 0
  for (let i = 0; i < admittedVersions.length; i++) {
    const lag = policyVersion - (admittedVersions[i] as number)
    if (!(lag >= 0))
      fail(`admittedVersions[${i}]`, `newer than the policy version ${policyVersion}`)
    sum += lag
  }
  return admittedVersions.length === 0 ? 0 : sum / admittedVersions.length
}
