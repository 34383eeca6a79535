import type { TinyMoeConfig } from "../../model/index.ts"
import { DEFAULT_LEARNER_CONFIG, type LearnerConfig } from "./trainer.ts"

/**
 * The RL settings of the embedded default (`t1 up`, `npm run exp:learn`): group-relative (RLOO)
 * advantages over the samples of a task, so no critic has to be warmed up before the policy
 * moves — runs of a few updates would otherwise spend all of them on the critic — and two epochs
 * of two minibatches per batch. The policy loss weighs generated tokens alike (`token`):
 * weighing episodes alike (`sequence`) was measured in session 14 on the three exp:learn seeds:
 * −5.8, +15.8 and +10.0 held-out points (mean +6.7) against token weighting's +10.8, +25.0 and
 * −8.3 (mean +9.2): it lifts the weak warm start and costs the strong ones, so the default stayed.
 */
export const EMBEDDED_RL_CONFIG: LearnerConfig = {
  ...DEFAULT_LEARNER_CONFIG,
  advantageMode: "group",
  criticWarmupSteps: 0,
}

/**
 * The policy shape of `npm run exp:learn`: the default TinyMoE with twice the width (d_model 128,
 * expert hidden 256; 2 layers, 4 heads, 4 experts top-2). Chosen by measured learning on the task
 * ladder (issue 14, scratch runs of the warm start on the same demonstrations): at d_model 64 the
 * policy learnt the demonstrations' names and copied almost none it had not seen in that role
 * (5–10% held-out after 800–2000 SFT steps on 600 demonstrations); at d_model 128 it reached
 * 31–34% after 600 steps, at about 3× the cost of a step.
 */
export const EMBEDDED_MODEL_CONFIG: Partial<TinyMoeConfig> = { dModel: 128, dFf: 256 }
