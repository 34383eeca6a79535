/**
 * A learning job's schedule as its spec resolves it — batch size, staleness bound, critic
 * warm-up, step budget, group size — with the contract's defaults applied once (an unset or zero
 * field means the default), for everything that reads it: the gateway's validation, the
 * coordinator's plan and admission, the buffer's batches and the learner.
 */
import { JobKind, type JobSpec } from "../../proto/index.ts"

/** Trajectories per learner update when learner.batch_trajectories is unset. */
export const DEFAULT_BATCH_TRAJECTORIES = 16
/** η when learner.max_staleness is unset (0 is on-policy, and is kept). */
export const DEFAULT_MAX_STALENESS = 2
/** Critic-only updates before the policy moves (T1: an aggressive critic warm-up). */
export const DEFAULT_CRITIC_WARMUP_STEPS = 10

export interface JobSchedule {
  /** Trajectories per update. */
  readonly batchSize: number
  /** η: the most versions a trained trajectory may lag the policy. */
  readonly maxStaleness: number
  /** Critic-only updates first (none for SFT). */
  readonly criticWarmupSteps: number
  /** The learner step that ends the job (warm-up plus PPO steps); undefined: until cancelled. */
  readonly maxSteps: number | undefined
  /** The buffer's group size (samples per task): whole groups for group statistics; 0: none. */
  readonly groupSize: number
}

/** The contract's rule for numeric spec fields: unset or zero means the default. */
export const orDefault = (x: number | undefined, fallback: number): number =>
  x === undefined || x === 0 ? fallback : x

/**
 * Critic warm-up steps: none for SFT; unset means the TypeScript learner's default, or 0 for an
 * external trainer (learner.external), whose own recipe decides and which counts in the step
 * budget only the warm-up it was asked for.
 */
export const criticWarmupStepsOf = (spec: JobSpec): number =>
  spec.kind === JobKind.SFT
    ? 0
    : (spec.learner?.criticWarmupSteps ??
      (spec.learner?.external === true ? 0 : DEFAULT_CRITIC_WARMUP_STEPS))

/**
 * The learner step (as announced with its weights, SFT not counted) that ends a train job:
 * critic warm-up plus PPO steps; undefined when ppo_steps is 0 (until cancelled). The
 * coordinator ends the job at the announcement of this step. An SFT job's is 0: its learner
 * announces the warm start and stops.
 */
export const learnerStepBudget = (spec: JobSpec): number | undefined => {
  if (spec.kind === JobKind.SFT) return 0
  const ppoSteps = spec.learner?.ppoSteps ?? 0
  return ppoSteps > 0 ? criticWarmupStepsOf(spec) + ppoSteps : undefined
}

export const jobSchedule = (spec: JobSpec): JobSchedule => ({
  batchSize: orDefault(spec.learner?.batchTrajectories, DEFAULT_BATCH_TRAJECTORIES),
  // Unset: the default; 0: on-policy.
  maxStaleness: spec.learner?.maxStaleness ?? DEFAULT_MAX_STALENESS,
  criticWarmupSteps: criticWarmupStepsOf(spec),
  maxSteps: learnerStepBudget(spec),
  groupSize: spec.samplesPerTask > 1 ? spec.samplesPerTask : 0,
})
