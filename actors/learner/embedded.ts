import { DEFAULT_LEARNER_CONFIG, type LearnerConfig } from "./trainer.ts"

/**
 * The RL settings of the embedded default (`t1 up`, `npm run exp:learn`): group-relative (RLOO)
 * advantages over the samples of a task, so no critic has to be warmed up before the policy
 * moves — runs of a few updates would otherwise spend all of them on the critic — and two epochs
 * of two minibatches per batch.
 */
export const EMBEDDED_RL_CONFIG: LearnerConfig = {
  ...DEFAULT_LEARNER_CONFIG,
  advantageMode: "group",
  criticWarmupSteps: 0,
}
