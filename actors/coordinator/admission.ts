/** Staleness-bounded admission of new episodes (asynchronous RL, as in AReaL). */
import { Data } from "effect"

/** An admission input that is not a count: a bug in the caller, raised before anything runs. */
export class AdmissionInputError extends Data.TaggedError("AdmissionInputError")<{
  readonly subject: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.subject}: ${this.reason}`
  }
}

const requireCount = (subject: string, x: number): void => {
  if (!(Number.isSafeInteger(x) && x >= 0))
    throw new AdmissionInputError({ subject, reason: `must be a non-negative integer, got ${x}` })
}

export interface AdmissionInput {
  /** The most episodes allowed to run at once. */
  readonly maxConcurrent: number
  /** Episodes admitted and still running (not yet accepted into the buffer). */
  readonly running: number
  /** η: the most policy versions an episode may lag behind the policy that trains on it. */
  readonly maxStaleness: number
  /** The learner's current policy version, counted from 0 at the start of this job's RL. */
  readonly policyVersion: number
  /** Trajectories consumed per learner step (each step makes one new version). */
  readonly batchSize: number
  /**
   * Episodes of this job that have finished and been accepted into the buffer (admitted and no
   * longer running): accepted + running is everything admitted so far.
   */
  readonly accepted: number
}

/**
 * How many new episodes may be admitted now:
 *
 *   max(0, min(maxConcurrent − running, (η + version + 1) · batchSize − (accepted + running)))
 *
 * The learner trains on trajectories in admission order, batchSize per step, and step v (on
 * policy version v) makes version v + 1. So the k-th episode admitted in the job (0-based) is
 * trained on at version ⌊k / batchSize⌋. Admitted now, by policy version v, its staleness is
 * ⌊k / batchSize⌋ − v, which is at most η exactly when k < (η + v + 1) · batchSize. With
 * accepted + running episodes admitted so far, that leaves (η + v + 1) · batchSize − (accepted
 * + running) slots; the concurrency cap leaves maxConcurrent − running. η = 0 is synchronous
 * RL: only the current version's batch is ever sampled. Episodes that are dropped (failed,
 * filtered out) should not be counted in `accepted`, so that they are replaced.
 *
 * The bound is exact when trajectories are trained in admission order. When they finish out of
 * order, a slow episode can be overtaken by later admissions and trained later than its slot,
 * so the buffer still drops trajectories more than η versions old (TakeBatchRequest's
 * max_staleness); this capacity keeps such drops rare by never sampling further ahead.
 */
export const admissionCapacity = (input: AdmissionInput): number => {
  const { maxConcurrent, running, maxStaleness, policyVersion, batchSize, accepted } = input
  requireCount("maxConcurrent", maxConcurrent)
  requireCount("running", running)
  requireCount("maxStaleness", maxStaleness)
  requireCount("policyVersion", policyVersion)
  requireCount("batchSize", batchSize)
  requireCount("accepted", accepted)
  const byConcurrency = maxConcurrent - running
  const byStaleness = (maxStaleness + policyVersion + 1) * batchSize - (accepted + running)
  return Math.max(0, Math.min(byConcurrency, byStaleness))
}
