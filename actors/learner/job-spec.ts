/**
 * What a pooled learner takes from a train job's spec: the trainer's hyperparameters, batch
 * size, staleness bound and step budget. Zero fields mean the learner's defaults (the contract's
 * rule), so a spec that sets nothing trains like `t1 actor learner --job` with no flags.
 */
import type { MessageInitShape } from "@bufbuild/protobuf"
import {
  AdvantageMode,
  type JobSpec,
  LossAggregation,
  LrSchedule,
  TrainPhase,
  type TrainStepReportSchema,
} from "../../proto/index.ts"
import { type JobSchedule, jobSchedule, orDefault } from "../../services/jobs/index.ts"
import type { SftStepReport, StepReport } from "./actor.ts"
import {
  type AdvantageMode as AdvantageModeName,
  DEFAULT_LEARNER_CONFIG,
  type LearnerConfig,
} from "./trainer.ts"

export interface JobLearnerPlan extends JobSchedule {
  readonly config: LearnerConfig
}

const ADVANTAGE_MODES: Record<AdvantageMode, AdvantageModeName> = {
  [AdvantageMode.UNSPECIFIED]: DEFAULT_LEARNER_CONFIG.advantageMode,
  [AdvantageMode.CRITIC]: "critic",
  [AdvantageMode.GROUP]: "group",
  [AdvantageMode.GROUP_CRITIC]: "group+critic",
}

const LR_SCHEDULES: Record<LrSchedule, LearnerConfig["lrSchedule"]> = {
  [LrSchedule.UNSPECIFIED]: DEFAULT_LEARNER_CONFIG.lrSchedule,
  [LrSchedule.CONSTANT]: "constant",
  [LrSchedule.COSINE]: "cosine",
}

const LOSS_AGGREGATIONS: Record<LossAggregation, LearnerConfig["lossAggregation"]> = {
  [LossAggregation.UNSPECIFIED]: DEFAULT_LEARNER_CONFIG.lossAggregation,
  [LossAggregation.TOKEN]: "token",
  [LossAggregation.SEQUENCE]: "sequence",
}

/** The critic warm-up a spec asks for: unset means the learner's default, 0 none. */
export const jobLearnerPlan = (spec: JobSpec): JobLearnerPlan => {
  const schedule = jobSchedule(spec)
  const l = spec.learner
  const d = DEFAULT_LEARNER_CONFIG
  const clip = l?.clipEps ?? 0
  const tis = l?.tisThreshold
  const lr = orDefault(l?.lr, d.lr)
  const ppoSteps = l?.ppoSteps ?? 0
  const config: LearnerConfig = {
    ...d,
    lr,
    // Unset: the actor's learning rate.
    criticLr: orDefault(l?.criticLr, lr),
    gamma: orDefault(l?.gamma, d.gamma),
    actorLambda: orDefault(l?.actorLambda, d.actorLambda),
    criticLambda: orDefault(l?.criticLambda, d.criticLambda),
    clipLow: clip > 0 ? clip : d.clipLow,
    clipHigh: clip > 0 ? clip : d.clipHigh,
    valueClip: orDefault(l?.valueClipEps, d.valueClip ?? 0) || undefined,
    entropyCoef: orDefault(l?.entropyCoef, d.entropyCoef),
    maxGradNorm: orDefault(l?.maxGradNorm, d.maxGradNorm),
    // Unset: the default; 0: no truncated importance sampling.
    tisThreshold: tis === undefined ? d.tisThreshold : tis > 0 ? tis : undefined,
    // The samplers' temperature: log-probs are compared and trained at it (0, greedy, is 1 here).
    temperature: orDefault(spec.sampling?.temperature, 1),
    replayRouting: l?.r3 ?? true,
    tito: l?.tito ?? true,
    sftSteps: l?.sftSteps ?? 0,
    sftLr: orDefault(l?.sftLr, d.sftLr),
    criticWarmupSteps: schedule.criticWarmupSteps,
    ppoEpochs: orDefault(l?.ppoEpochs, d.ppoEpochs),
    minibatches: orDefault(l?.minibatches, d.minibatches),
    advantageMode:
      ADVANTAGE_MODES[l?.advantageMode ?? AdvantageMode.UNSPECIFIED] ?? d.advantageMode,
    normalizeAdvantages: l?.normalizeAdvantages ?? d.normalizeAdvantages,
    centerAdvantages: l?.centerAdvantages,
    lossAggregation:
      LOSS_AGGREGATIONS[l?.lossAggregation ?? LossAggregation.UNSPECIFIED] ?? d.lossAggregation,
    dropZeroVarianceGroups: l?.dropZeroVarianceGroups,
    lrSchedule: LR_SCHEDULES[l?.lrSchedule ?? LrSchedule.UNSPECIFIED] ?? d.lrSchedule,
    lrWarmupSteps: l?.lrWarmupSteps ?? 0,
    // Unset: decay over the job's PPO steps (no decay when those are unbounded).
    lrDecaySteps: orDefault(l?.lrDecaySteps, ppoSteps),
    minLrRatio: orDefault(l?.minLrRatio, d.minLrRatio),
    publishEverySteps: orDefault(l?.publishEverySteps, d.publishEverySteps),
    seed: Number(spec.seed & 0xffffffffn),
  }
  return { config, ...schedule }
}

const PHASES: Record<StepReport["phase"], TrainPhase> = {
  sft: TrainPhase.SFT,
  critic_warmup: TrainPhase.CRITIC_WARMUP,
  ppo: TrainPhase.PPO,
}

/** The job event of one learner update (WatchJob's learner_step). */
export const trainStepReport = (
  jobId: string,
  r: StepReport,
): MessageInitShape<typeof TrainStepReportSchema> => ({
  jobId,
  step: BigInt(r.step),
  policyVersion: r.version,
  phase: PHASES[r.phase],
  batchId: r.batchId,
  trajectories: r.sequences,
  tokens: BigInt(r.tokens),
  trainInferLogprobAbsDiff: r.trainInferLogprobAbsDiff,
  mismatchKlK3: r.mismatchKlK3,
  policyLoss: r.policyLoss,
  valueLoss: r.valueLoss,
  explainedVariance: r.explainedVariance,
  entropy: r.entropy,
  clipfrac: r.clipfrac,
  tisClipfrac: r.tisClipfrac,
  approxKl: r.approxKl,
  rewardMean: r.rewardMean,
  resolvedRate: r.resolvedRate,
  tokensPerSecond: r.tokens / Math.max(1e-3, r.seconds),
  stalenessMean: r.stalenessMean,
  metrics: stepMetricsMap(r),
  episodeIds: [...r.episodeIds],
  skipped: r.skipped,
  skipReason: r.skipReason,
  durationMs: Math.round(r.seconds * 1000),
})

/** The job event of one SFT warm-start update (learner_step, phase SFT, its own step count). */
export const sftStepReport = (
  jobId: string,
  version: bigint,
  r: SftStepReport,
): MessageInitShape<typeof TrainStepReportSchema> => ({
  jobId,
  step: BigInt(r.step),
  policyVersion: version,
  phase: TrainPhase.SFT,
  trajectories: r.sequences,
  tokens: BigInt(r.tokens),
  policyLoss: r.loss,
  tokensPerSecond: r.tokens / Math.max(1e-3, r.seconds),
  metrics: { loss: r.loss, sft_steps: r.steps, golden_trajectories: r.golden },
  durationMs: Math.round(r.seconds * 1000),
})

/**
 * TrainStepReport.metrics: everything without a named field, lower_snake_case; per-epoch
 * figures as `<name>_epoch_<k>` (k from 1).
 */
export const stepMetricsMap = (r: StepReport): Record<string, number> => {
  const m: Record<string, number> = {
    grad_norm: r.gradNorm,
    loss: r.loss,
    action_tokens: r.actionTokens,
    lr: r.lr,
    critic_lr: r.criticLr,
    optimizer_steps: r.optimizerSteps,
    ratio_mean: r.ratioMean,
    ratio_min: r.ratioMin,
    ratio_max: r.ratioMax,
    value_clipfrac: r.valueClipfrac,
    reward_per_test_mean: r.trainRewardMean,
    weight_mean: r.weightMean,
    advantage_mean: r.advantageMean,
    advantage_std: r.advantageStd,
    dropped_zero_variance: r.droppedZeroVariance,
    dropped_invalid: r.droppedInvalid,
    dropped_out_of_vocab: r.droppedOutOfVocab,
    ungrouped: r.ungrouped,
    skipped: r.skipped ? 1 : 0,
    buffer_dropped_zero_variance: r.bufferDroppedZeroVariance,
    buffer_dropped_stale: r.bufferDroppedStale,
  }
  r.epochs.forEach((e, i) => {
    const k = i + 1
    m[`policy_loss_epoch_${k}`] = e.policyLoss
    m[`value_loss_epoch_${k}`] = e.valueLoss
    m[`clipfrac_epoch_${k}`] = e.clipfrac
    m[`approx_kl_epoch_${k}`] = e.approxKl
    m[`ratio_mean_epoch_${k}`] = e.ratioMean
    m[`ratio_min_epoch_${k}`] = e.ratioMin
    m[`ratio_max_epoch_${k}`] = e.ratioMax
    m[`value_clipfrac_epoch_${k}`] = e.valueClipfrac
    m[`skipped_minibatches_epoch_${k}`] = e.skippedMinibatches
  })
  return m
}
