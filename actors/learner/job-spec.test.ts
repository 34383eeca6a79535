import { create, fromJson } from "@bufbuild/protobuf"
import { describe, expect, it } from "vitest"
import {
  AdvantageMode,
  JobKind,
  JobSpecSchema,
  LossAggregation,
  LrSchedule,
  TrainPhase,
} from "../../proto/index.ts"
import { learnerStepBudget } from "../../services/jobs/index.ts"
import { jobLearnerPlan, sftStepReport, trainStepReport } from "./job-spec.ts"
import { DEFAULT_CRITIC_WARMUP_STEPS, DEFAULT_LEARNER_CONFIG } from "./trainer.ts"

describe("jobLearnerPlan", () => {
  it("treats every zero or unset field as the learner's default", () => {
    const plan = jobLearnerPlan(create(JobSpecSchema, { kind: JobKind.TRAIN, learner: {} }))
    expect(plan.config).toEqual(DEFAULT_LEARNER_CONFIG)
    expect(plan).toMatchObject({
      batchSize: 16,
      maxStaleness: 2,
      maxSteps: undefined,
      groupSize: 0,
    })
  })

  it("takes the spec's hyperparameters, ablations and step budget", () => {
    const plan = jobLearnerPlan(
      create(JobSpecSchema, {
        kind: JobKind.TRAIN,
        samplesPerTask: 4,
        sampling: { temperature: 0.7 },
        learner: {
          clipEps: 0.1,
          valueClipEps: 0.3,
          entropyCoef: 0.02,
          gamma: 0.99,
          actorLambda: 0.9,
          lr: 1e-4,
          maxGradNorm: 0.5,
          tisThreshold: 3,
          r3: false,
          tito: false,
          criticWarmupSteps: 2,
          ppoSteps: 5,
          batchTrajectories: 8,
          maxStaleness: 1,
        },
      }),
    )
    expect(plan.config).toMatchObject({
      clipLow: 0.1,
      clipHigh: 0.1,
      valueClip: 0.3,
      entropyCoef: 0.02,
      gamma: 0.99,
      actorLambda: 0.9,
      lr: 1e-4,
      maxGradNorm: 0.5,
      tisThreshold: 3,
      temperature: 0.7,
      replayRouting: false,
      tito: false,
      criticWarmupSteps: 2,
    })
    expect(plan).toMatchObject({ batchSize: 8, maxStaleness: 1, maxSteps: 7, groupSize: 4 })
  })

  it("tis_threshold: unset keeps the default cap, 0 turns truncated importance sampling off", () => {
    const tis = (learner: { tisThreshold?: number }) =>
      jobLearnerPlan(create(JobSpecSchema, { kind: JobKind.TRAIN, learner })).config.tisThreshold
    expect(tis({})).toBe(DEFAULT_LEARNER_CONFIG.tisThreshold)
    expect(tis({ tisThreshold: 0 })).toBeUndefined()
    expect(tis({ tisThreshold: 4 })).toBe(4)
    // From a job file's JSON form, as `t1 submit` reads it.
    const fromFile = fromJson(JobSpecSchema, {
      kind: "JOB_KIND_TRAIN",
      learner: { tisThreshold: 0 },
    })
    expect(jobLearnerPlan(fromFile).config.tisThreshold).toBeUndefined()
  })

  it("takes every PPO, advantage, schedule and warm-start field", () => {
    const plan = jobLearnerPlan(
      create(JobSpecSchema, {
        kind: JobKind.TRAIN,
        seed: 7n,
        learner: {
          lr: 1e-4,
          criticLr: 5e-4,
          criticLambda: 0.9,
          sftSteps: 30,
          sftLr: 1e-3,
          ppoEpochs: 4,
          minibatches: 3,
          ppoSteps: 20,
          advantageMode: AdvantageMode.GROUP_CRITIC,
          normalizeAdvantages: false,
          centerAdvantages: true,
          lossAggregation: LossAggregation.SEQUENCE,
          dropZeroVarianceGroups: false,
          lrSchedule: LrSchedule.COSINE,
          lrWarmupSteps: 2,
          minLrRatio: 0.05,
          publishEverySteps: 2,
        },
      }),
    )
    expect(plan.config).toMatchObject({
      lr: 1e-4,
      criticLr: 5e-4,
      criticLambda: 0.9,
      sftSteps: 30,
      sftLr: 1e-3,
      ppoEpochs: 4,
      minibatches: 3,
      advantageMode: "group+critic",
      normalizeAdvantages: false,
      centerAdvantages: true,
      lossAggregation: "sequence",
      dropZeroVarianceGroups: false,
      lrSchedule: "cosine",
      lrWarmupSteps: 2,
      // Unset: over the job's PPO steps.
      lrDecaySteps: 20,
      minLrRatio: 0.05,
      publishEverySteps: 2,
      seed: 7,
      criticWarmupSteps: DEFAULT_CRITIC_WARMUP_STEPS,
    })
    expect(plan.maxSteps).toBe(DEFAULT_CRITIC_WARMUP_STEPS + 20)
    const group = jobLearnerPlan(
      create(JobSpecSchema, {
        kind: JobKind.TRAIN,
        learner: { lr: 2e-4, advantageMode: AdvantageMode.GROUP, lrDecaySteps: 9 },
      }),
    ).config
    // critic_lr unset: the actor's; the group filter unset: on under a group baseline (resolved
    // by the trainer), and the decay span as given.
    expect(group).toMatchObject({
      criticLr: 2e-4,
      advantageMode: "group",
      dropZeroVarianceGroups: undefined,
      centerAdvantages: undefined,
      lossAggregation: "token",
      lrDecaySteps: 9,
    })
  })

  it("counts the default critic warm-up in the step budget unless the spec sets it (0 included)", () => {
    const spec = (learner: object) => create(JobSpecSchema, { kind: JobKind.TRAIN, learner })
    expect(learnerStepBudget(spec({ ppoSteps: 5 }))).toBe(DEFAULT_CRITIC_WARMUP_STEPS + 5)
    expect(learnerStepBudget(spec({ ppoSteps: 5, criticWarmupSteps: 0 }))).toBe(5)
    expect(learnerStepBudget(spec({ ppoSteps: 5, criticWarmupSteps: 3 }))).toBe(8)
    expect(learnerStepBudget(spec({}))).toBeUndefined()
    expect(jobLearnerPlan(spec({ criticWarmupSteps: 0 })).config.criticWarmupSteps).toBe(0)
  })

  it("max_staleness: unset is the default η, 0 is on-policy", () => {
    const plan = (learner: object) =>
      jobLearnerPlan(create(JobSpecSchema, { kind: JobKind.TRAIN, learner }))
    expect(plan({}).maxStaleness).toBe(2)
    expect(plan({ maxStaleness: 0 }).maxStaleness).toBe(0)
    expect(plan({ maxStaleness: 3 }).maxStaleness).toBe(3)
  })

  it("an SFT job: the warm start, then nothing (step budget 0, no critic warm-up)", () => {
    const sft = create(JobSpecSchema, {
      kind: JobKind.SFT,
      learner: { sftSteps: 40, sftLr: 1e-3, batchTrajectories: 8 },
    })
    expect(learnerStepBudget(sft)).toBe(0)
    const plan = jobLearnerPlan(sft)
    expect(plan.maxSteps).toBe(0)
    expect(plan.batchSize).toBe(8)
    expect(plan.config.sftSteps).toBe(40)
    expect(plan.config.sftLr).toBe(1e-3)
    expect(plan.config.criticWarmupSteps).toBe(0)
  })

  it("reports an SFT update as a learner_step of phase SFT with its loss", () => {
    const r = sftStepReport("job-s", 0n, {
      step: 3,
      steps: 10,
      loss: 1.25,
      sequences: 8,
      tokens: 800,
      seconds: 0.5,
      golden: 20,
    })
    expect(r).toMatchObject({
      jobId: "job-s",
      step: 3n,
      policyVersion: 0n,
      phase: TrainPhase.SFT,
      trajectories: 8,
      tokens: 800n,
      policyLoss: 1.25,
      tokensPerSecond: 1600,
      durationMs: 500,
      metrics: { loss: 1.25, sft_steps: 10, golden_trajectories: 20 },
    })
  })

  it("reports a learner update as the contract's TrainStepReport", () => {
    const epoch = {
      policyLoss: 0,
      valueLoss: 0.5,
      entropy: 2,
      clipfrac: 0.25,
      approxKl: 0.01,
      ratioMean: 1.01,
      ratioMin: 0.9,
      ratioMax: 1.3,
      valueClipfrac: 0.5,
      skippedMinibatches: 0,
    }
    const report = trainStepReport("job-1", {
      phase: "critic_warmup",
      sequences: 3,
      tokens: 120,
      actionTokens: 40,
      loss: 1,
      policyLoss: 0,
      valueLoss: 0.5,
      entropy: 2,
      clipfrac: 0,
      tisClipfrac: 0,
      approxKl: 0,
      ratioMean: 1,
      ratioMin: 1,
      ratioMax: 1,
      valueClipfrac: 0.25,
      epochs: [{ ...epoch, clipfrac: 0 }, epoch],
      explainedVariance: 0.1,
      trainInferLogprobAbsDiff: 0.001,
      mismatchKlK3: 1e-6,
      gradNorm: 0.3,
      optimizerSteps: 4,
      lr: 0,
      criticLr: 1e-4,
      rewardMean: 0.25,
      trainRewardMean: 0.125,
      resolvedRate: 0,
      stalenessMean: 0.5,
      weightMean: 1,
      advantageMean: 0.1,
      advantageStd: 0.2,
      droppedZeroVariance: 2,
      droppedInvalid: 0,
      droppedOutOfVocab: 0,
      ungrouped: 0,
      trainedEpisodeIds: ["e1", "e2", "e3"],
      skipped: false,
      skipReason: "",
      seconds: 2,
      step: 1,
      version: 1n,
      batchId: "b1",
      episodeIds: ["e1", "e2", "e3"],
      bufferDroppedZeroVariance: 4,
      bufferDroppedStale: 1,
    })
    expect(report).toMatchObject({
      jobId: "job-1",
      step: 1n,
      policyVersion: 1n,
      phase: TrainPhase.CRITIC_WARMUP,
      trajectories: 3,
      tokens: 120n,
      tokensPerSecond: 60,
      metrics: {
        grad_norm: 0.3,
        loss: 1,
        action_tokens: 40,
        critic_lr: 1e-4,
        optimizer_steps: 4,
        value_clipfrac: 0.25,
        reward_per_test_mean: 0.125,
        dropped_zero_variance: 2,
        buffer_dropped_zero_variance: 4,
        buffer_dropped_stale: 1,
        skipped: 0,
        clipfrac_epoch_1: 0,
        clipfrac_epoch_2: 0.25,
        ratio_max_epoch_2: 1.3,
        approx_kl_epoch_2: 0.01,
      },
      episodeIds: ["e1", "e2", "e3"],
      durationMs: 2000,
      skipped: false,
      skipReason: "",
    })
  })
})
