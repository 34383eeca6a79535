import { create, type MessageInitShape } from "@bufbuild/protobuf"
import { describe, expect, it } from "vitest"
import {
  AdvantageMode,
  JobKind,
  JobSpecSchema,
  LossAggregation,
  LrSchedule,
} from "../../proto/index.ts"
import { validateJobSpec } from "./validate.ts"

type LearnerInit = NonNullable<MessageInitShape<typeof JobSpecSchema>["learner"]>

const train = (learner: LearnerInit, samplesPerTask = 4) =>
  create(JobSpecSchema, { kind: JobKind.TRAIN, taskSet: "tasks/x", samplesPerTask, learner })

const problems = (learner: LearnerInit, samplesPerTask = 4) =>
  validateJobSpec(train(learner, samplesPerTask)).map((v) => `${v.fieldPath}: ${v.reason}`)

describe("validateJobSpec: learner settings", () => {
  it("accepts every PPO, advantage, schedule and warm-start setting in range", () => {
    expect(
      problems({
        sftSteps: 30,
        sftLr: 3e-3,
        criticWarmupSteps: 0,
        ppoSteps: 10,
        batchTrajectories: 8,
        ppoEpochs: 4,
        minibatches: 4,
        lr: 1e-4,
        criticLr: 1e-3,
        criticLambda: 0.95,
        advantageMode: AdvantageMode.GROUP_CRITIC,
        normalizeAdvantages: false,
        dropZeroVarianceGroups: true,
        lrSchedule: LrSchedule.COSINE,
        lrWarmupSteps: 2,
        lrDecaySteps: 10,
        minLrRatio: 0.05,
        maxStaleness: 1,
        publishEverySteps: 2,
      }),
    ).toEqual([])
  })

  it("learner.external: train jobs only, without the SFT warm start t1's learner runs", () => {
    expect(problems({ external: true, ppoSteps: 3 })).toEqual([])
    expect(problems({ external: true, sftSteps: 5 })).toEqual([
      expect.stringMatching(/^spec\.learner\.sft_steps: the SFT warm start is t1's learner's/),
    ])
    const sft = create(JobSpecSchema, {
      kind: JobKind.SFT,
      taskSet: "tasks/x",
      learner: { sftSteps: 4, external: true },
    })
    expect(validateJobSpec(sft).map((v) => v.fieldPath)).toEqual(["spec.learner.external"])
    const evalJob = create(JobSpecSchema, {
      kind: JobKind.EVAL,
      taskSet: "tasks/x",
      learner: { external: true },
    })
    expect(validateJobSpec(evalJob).map((v) => v.fieldPath)).toEqual(["spec.learner.external"])
  })

  it("tis_threshold: unset or 0 (off) or at least 1", () => {
    expect(problems({})).toEqual([])
    expect(problems({ tisThreshold: 0 })).toEqual([])
    expect(problems({ tisThreshold: 1.5 })).toEqual([])
    expect(problems({ tisThreshold: 0.5 })).toEqual([
      "spec.learner.tis_threshold: must be 0 (disabled) or >= 1, got 0.5",
    ])
  })

  it("refuses center_advantages where no whitening happens", () => {
    expect(problems({ normalizeAdvantages: false, centerAdvantages: false })).toEqual([
      "spec.learner.center_advantages: only applies when the advantages are whitened: leave it unset or set normalize_advantages",
    ])
    expect(problems({ centerAdvantages: true })).toEqual([])
  })

  it("refuses periodic evaluation, which nothing runs", () => {
    expect(problems({ evalEverySteps: 2 })).toEqual([
      expect.stringMatching(/^spec\.learner\.eval_every_steps: periodic evaluation .* got 2$/),
    ])
  })

  it("refuses publishing less often than the staleness bound allows", () => {
    expect(problems({ maxStaleness: 1, publishEverySteps: 3 })).toEqual([
      "spec.learner.publish_every_steps: must be <= max_staleness + 1 (2): episodes sampled between publications must stay trainable, got 3",
    ])
    // Default η = 2.
    expect(problems({ publishEverySteps: 3 })).toEqual([])
    expect(problems({ publishEverySteps: 4 })).toHaveLength(1)
    // η = 0 (on-policy) is a setting, not the default: every update is published.
    expect(problems({ maxStaleness: 0, publishEverySteps: 2 })).toEqual([
      "spec.learner.publish_every_steps: must be <= max_staleness + 1 (1): episodes sampled between publications must stay trainable, got 2",
    ])
    expect(problems({ maxStaleness: 0 })).toEqual([])
  })

  it("refuses a group baseline without groups, and unknown enum values", () => {
    expect(problems({ advantageMode: AdvantageMode.GROUP }, 1)).toEqual([
      "spec.learner.advantage_mode: a group baseline needs spec.samples_per_task >= 2 (rollouts per task to compare), got 1",
    ])
    expect(problems({ advantageMode: AdvantageMode.CRITIC }, 1)).toEqual([])
    expect(problems({ advantageMode: 9 as AdvantageMode })).toEqual([
      "spec.learner.advantage_mode: must be an AdvantageMode value, got 9",
    ])
    expect(problems({ lrSchedule: 7 as LrSchedule })).toEqual([
      "spec.learner.lr_schedule: must be an LrSchedule value, got 7",
    ])
    expect(problems({ lossAggregation: 3 as LossAggregation })).toEqual([
      "spec.learner.loss_aggregation: must be a LossAggregation value, got 3",
    ])
    expect(problems({ lossAggregation: LossAggregation.SEQUENCE })).toEqual([])
  })

  it("checks the schedule, the epochs, the minibatches and the SFT rate", () => {
    expect(problems({ minLrRatio: 1.5 })).toEqual([
      "spec.learner.min_lr_ratio: must be in [0, 1], got 1.5",
    ])
    expect(problems({ lrWarmupSteps: 5, lrDecaySteps: 5 })).toEqual([
      "spec.learner.lr_decay_steps: must be > spec.learner.lr_warmup_steps (5), got 5",
    ])
    expect(problems({ ppoEpochs: 65 })).toEqual(["spec.learner.ppo_epochs: must be <= 64, got 65"])
    expect(problems({ minibatches: 17 })).toEqual([
      "spec.learner.minibatches: must be <= the default batch_trajectories (16), got 17",
    ])
    expect(problems({ sftLr: 2 })).toEqual(["spec.learner.sft_lr: must be in (0, 1), got 2"])
  })

  it("JOB_KIND_SFT: needs sft_steps, refuses PPO and critic settings that would not run", () => {
    const sft = (learner?: LearnerInit) =>
      validateJobSpec(
        create(JobSpecSchema, {
          kind: JobKind.SFT,
          taskSet: "tasks/x",
          ...(learner === undefined ? {} : { learner }),
        }),
      ).map((v) => `${v.fieldPath}: ${v.reason}`)
    expect(sft({ sftSteps: 100, sftLr: 2e-3, batchTrajectories: 8 })).toEqual([])
    expect(sft()).toEqual(["spec.learner: required for JOB_KIND_SFT (its sft_steps)"])
    expect(sft({ sftLr: 1e-3 })).toEqual(["spec.learner.sft_steps: must be > 0 for JOB_KIND_SFT"])
    expect(sft({ sftSteps: 5, ppoSteps: 3, criticWarmupSteps: 2 })).toEqual([
      'spec.learner.ppo_steps: JOB_KIND_SFT runs no PPO: leave it 0 and train from the result in a JOB_KIND_TRAIN job with policy_ref "job:<id>", got 3',
      "spec.learner.critic_warmup_steps: JOB_KIND_SFT trains no critic: leave it unset, got 2",
    ])
    expect(sft({ sftSteps: 5, sftLr: 3 })).toEqual([
      "spec.learner.sft_lr: must be in (0, 1), got 3",
    ])
  })
})
