/** Training phases: supervised fine-tuning, then critic warm-up, then PPO. */

import { requireCount } from "./errors.ts"

export type TrainPhase = "sft" | "critic_warmup" | "ppo"

export interface PhaseSchedule {
  /** Updates of supervised fine-tuning on golden trajectories (0 = none). */
  readonly sftSteps: number
  /**
   * Updates after SFT that train only the critic, on rollouts of the (frozen) policy, so that
   * the first PPO advantages do not come from an untrained value head (0 = none).
   */
  readonly criticWarmupSteps: number
}

/**
 * The phase of the update with 0-based index `step` (the number of updates done before it;
 * TrainStepReport.step, 1-based, is step + 1): [0, sftSteps) is "sft",
 * [sftSteps, sftSteps + criticWarmupSteps) is "critic_warmup", and from there on "ppo".
 */
export const trainPhase = (step: number, schedule: PhaseSchedule): TrainPhase => {
  requireCount("step", step)
  requireCount("sftSteps", schedule.sftSteps)
  requireCount("criticWarmupSteps", schedule.criticWarmupSteps)
  if (step < schedule.sftSteps) return "sft"
  if (step < schedule.sftSteps + schedule.criticWarmupSteps) return "critic_warmup"
  return "ppo"
}

/**
 * The `policyWeight` of `ppoLoss` in a phase: 1 in PPO; 0 in critic warm-up (only the value
 * loss has a gradient). SFT does not use the PPO loss (it is a likelihood loss on golden
 * tokens); 0 there too, so that a PPO loss evaluated during SFT leaves the policy alone.
 */
export const policyWeightFor = (phase: TrainPhase): number => (phase === "ppo" ? 1 : 0)
