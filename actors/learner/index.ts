/** The learner folder's surface: what other folders may import. */
export { runLearner, type StepReport } from "./actor.ts"
export {
  type TrainingSequence,
  TrajectoryMalformed,
  trainingSequence,
  trainingSequences,
} from "./decode.ts"
export { EMBEDDED_MODEL_CONFIG, EMBEDDED_RL_CONFIG } from "./embedded.ts"
export { type LearnerPoolOptions, runLearnerPool } from "./job-pool.ts"
export { jobLearnerPlan } from "./job-spec.ts"
export { trainInferLogprobAbsDiff } from "./ppo/index.ts"
export { messagesOf } from "./retokenize.ts"
export { NoGoldenTrajectory, sftWarmStart } from "./sft.ts"
export {
  continuedActorOptimizer,
  DEFAULT_LEARNER_CONFIG,
  type LearnerConfig,
  Trainer,
} from "./trainer.ts"
export {
  type PolicyVocabulary,
  policyVocabulary,
  refuseVocabulary,
  vocabularyMismatch,
} from "./vocab-check.ts"
