import { create } from "@bufbuild/protobuf"
import { describe, expect, it } from "vitest"
import { JobKind, JobSpecSchema, TrainPhase } from "../../proto/index.ts"
import { jobLearnerPlan, trainStepReport } from "./job-spec.ts"
import { DEFAULT_LEARNER_CONFIG } from "./trainer.ts"

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

  it("reports a learner update as the contract's TrainStepReport", () => {
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
      explainedVariance: 0.1,
      trainInferLogprobAbsDiff: 0.001,
      mismatchKlK3: 1e-6,
      gradNorm: 0.3,
      rewardMean: 0.25,
      resolvedRate: 0,
      stalenessMean: 0.5,
      seconds: 2,
      step: 1,
      version: 1n,
      batchId: "b1",
      episodeIds: ["e1", "e2", "e3"],
    })
    expect(report).toMatchObject({
      jobId: "job-1",
      step: 1n,
      policyVersion: 1n,
      phase: TrainPhase.CRITIC_WARMUP,
      trajectories: 3,
      tokens: 120n,
      tokensPerSecond: 60,
      metrics: { grad_norm: 0.3, loss: 1, action_tokens: 40 },
      episodeIds: ["e1", "e2", "e3"],
      durationMs: 2000,
    })
  })
})
