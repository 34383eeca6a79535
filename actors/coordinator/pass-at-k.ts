/** Evaluation statistics of a job: resolved rate and the unbiased pass@k estimator. */

/** Scored episodes of one task: n samples, c of them resolved. */
export interface TaskOutcome {
  readonly taskId: string
  readonly samples: number
  readonly resolved: number
  readonly rewardSum: number
}

/**
 * The unbiased estimate of pass@k from n samples of which c resolved the task (Chen et al.,
 * 2021): the probability that a draw of k of the n samples without replacement holds at least
 * one resolved sample,
 *
 *   pass@k = 1 − C(n − c, k) / C(n, k) = 1 − ∏_{i = n − c + 1}^{n} (1 − k / i)
 *
 * computed as the product, which stays exact in floating point where the binomials overflow.
 * Undefined for k > n (NaN); 1 whenever every draw of k must contain a resolved sample.
 */
export const passAtK = (n: number, c: number, k: number): number => {
  if (!Number.isInteger(n) || !Number.isInteger(c) || !Number.isInteger(k) || k < 1 || c < 0)
    return Number.NaN
  if (k > n || c > n) return Number.NaN
  if (n - c < k) return 1
  let missAll = 1
  for (let i = n - c + 1; i <= n; i++) missAll *= 1 - k / i
  return 1 - missAll
}

export interface EvaluationStats {
  /** Resolved episodes over scored episodes (all tasks together). */
  readonly resolvedRate: number
  readonly rewardMean: number
  readonly episodes: number
  readonly tasks: number
  /** pass@k for k = 1..maxK, averaged over the tasks with at least k scored samples. */
  readonly passAtK: ReadonlyMap<number, number>
  /** Per task: pass@k for k = 1..min(maxK, samples). */
  readonly perTask: ReadonlyArray<{
    readonly taskId: string
    readonly samples: number
    readonly resolved: number
    readonly passAtK: ReadonlyMap<number, number>
  }>
}

/**
 * Resolved rate, mean reward and pass@k (k = 1..maxK, the group size) of an evaluation. A task
 * whose episodes all failed for infrastructure reasons or were unverifiable (the counts given
 * here are of scored episodes only) has no samples and counts in no average;
 * a task with fewer than k scored samples is left out of the pass@k average for that k.
 */
export const evaluationStats = (
  outcomes: ReadonlyArray<TaskOutcome>,
  maxK: number,
): EvaluationStats => {
  let episodes = 0
  let resolved = 0
  let rewardSum = 0
  const sums = new Map<number, { sum: number; tasks: number }>()
  const perTask = outcomes.map((o) => {
    episodes += o.samples
    resolved += o.resolved
    rewardSum += o.rewardSum
    const byK = new Map<number, number>()
    for (let k = 1; k <= Math.min(maxK, o.samples); k++) {
      const p = passAtK(o.samples, o.resolved, k)
      byK.set(k, p)
      const s = sums.get(k) ?? { sum: 0, tasks: 0 }
      sums.set(k, { sum: s.sum + p, tasks: s.tasks + 1 })
    }
    return { taskId: o.taskId, samples: o.samples, resolved: o.resolved, passAtK: byK }
  })
  const overall = new Map<number, number>()
  for (const [k, s] of [...sums].sort((a, b) => a[0] - b[0])) overall.set(k, s.sum / s.tasks)
  return {
    resolvedRate: episodes === 0 ? 0 : resolved / episodes,
    rewardMean: episodes === 0 ? 0 : rewardSum / episodes,
    episodes,
    tasks: outcomes.filter((o) => o.samples > 0).length,
    passAtK: overall,
    perTask,
  }
}
