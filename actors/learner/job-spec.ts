/**
 * What a pooled learner takes from a train job's spec: the trainer's hyperparameters, batch
 * size, staleness bound and step budget. Zero fields mean the learner's defaults (the contract's
 * rule), so a spec that sets nothing trains like `t1 actor learner --job` with no flags.
 */
import type { MessageInitShape } from "@bufbuild/protobuf"
import { type JobSpec, TrainPhase, type TrainStepReportSchema } from "../../proto/index.ts"
import type { StepReport } from "./actor.ts"
import { DEFAULT_LEARNER_CONFIG, type LearnerConfig } from "./trainer.ts"

export interface JobLearnerPlan {
  readonly config: LearnerConfig
  readonly batchSize: number
  readonly maxStaleness: number
  /** Critic warm-up plus PPO steps; undefined: until the job is cancelled. */
  readonly maxSteps: number | undefined
  /** The buffer's group size (samples per task): whole groups for group statistics. */
  readonly groupSize: number
}

export const DEFAULT_BATCH_TRAJECTORIES = 16
export const DEFAULT_MAX_STALENESS = 2

const or = (x: number | undefined, fallback: number): number =>
  x === undefined || x === 0 ? fallback : x

export const jobLearnerPlan = (spec: JobSpec): JobLearnerPlan => {
  const l = spec.learner
  const clip = l?.clipEps ?? 0
  const tis = l?.tisThreshold ?? 0
  const config: LearnerConfig = {
    ...DEFAULT_LEARNER_CONFIG,
    lr: or(l?.lr, DEFAULT_LEARNER_CONFIG.lr),
    gamma: or(l?.gamma, DEFAULT_LEARNER_CONFIG.gamma),
    actorLambda: or(l?.actorLambda, DEFAULT_LEARNER_CONFIG.actorLambda),
    clipLow: clip > 0 ? clip : DEFAULT_LEARNER_CONFIG.clipLow,
    clipHigh: clip > 0 ? clip : DEFAULT_LEARNER_CONFIG.clipHigh,
    valueClip: or(l?.valueClipEps, DEFAULT_LEARNER_CONFIG.valueClip ?? 0) || undefined,
    entropyCoef: or(l?.entropyCoef, DEFAULT_LEARNER_CONFIG.entropyCoef),
    maxGradNorm: or(l?.maxGradNorm, DEFAULT_LEARNER_CONFIG.maxGradNorm),
    tisThreshold: tis > 0 ? tis : DEFAULT_LEARNER_CONFIG.tisThreshold,
    // The samplers' temperature: log-probs are compared and trained at it (0, greedy, is 1 here).
    temperature: or(spec.sampling?.temperature, 1),
    replayRouting: l?.r3 ?? true,
    tito: l?.tito ?? true,
    criticWarmupSteps: l?.criticWarmupSteps ?? 0,
  }
  const ppoSteps = l?.ppoSteps ?? 0
  return {
    config,
    batchSize: or(l?.batchTrajectories, DEFAULT_BATCH_TRAJECTORIES),
    maxStaleness: or(l?.maxStaleness, DEFAULT_MAX_STALENESS),
    maxSteps: ppoSteps > 0 ? config.criticWarmupSteps + ppoSteps : undefined,
    groupSize: spec.samplesPerTask > 1 ? spec.samplesPerTask : 0,
  }
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
  metrics: { grad_norm: r.gradNorm, loss: r.loss, action_tokens: r.actionTokens },
  episodeIds: [...r.episodeIds],
  durationMs: Math.round(r.seconds * 1000),
  finishedUnixMs: BigInt(Date.now()),
})
