import { toBinary } from "@bufbuild/protobuf"
import {
  AdvantageMode,
  JobKind,
  type JobSpec,
  JobSpecSchema,
  type LearnerConfig,
  type Limits,
  LossAggregation,
  LrSchedule,
  type SamplingParams,
  TaskSplit,
} from "../../proto/index.ts"
import {
  DEFAULT_BATCH_TRAJECTORIES,
  DEFAULT_MAX_STALENESS,
  JOB_ID_PATTERN,
  type Violation,
} from "../jobs/index.ts"

/** Names without whitespace or control characters (task sets, task ids, policy refs). */
const NAME = /^[^\s\p{Cc}]+$/u
const LABEL_KEY = /^[A-Za-z_][A-Za-z0-9_./-]{0,62}$/

/** A stored JobStatus must fit in one NATS message; the spec gets most of it. */
export const MAX_SPEC_BYTES = 512 * 1024
const MAX_TASK_IDS = 100_000
const MAX_LABELS = 64
const MAX_SAMPLES_PER_TASK = 1024
const MAX_EPISODE_ATTEMPTS = 100
const MAX_STOP_TOKENS = 1024

const JOB_KINDS = [JobKind.TRAIN, JobKind.EVAL, JobKind.ROLLOUT, JobKind.SFT]
const MAX_PPO_EPOCHS = 64

class Collector {
  readonly violations: Violation[] = []
  add(fieldPath: string, reason: string): void {
    this.violations.push({ fieldPath, reason })
  }
  finite(path: string, value: number): boolean {
    if (Number.isFinite(value)) return true
    this.add(path, `must be a finite number, got ${value}`)
    return false
  }
  atLeast(path: string, value: number, min: number): void {
    if (this.finite(path, value) && value < min) this.add(path, `must be >= ${min}, got ${value}`)
  }
  closed(path: string, value: number, min: number, max: number): void {
    if (this.finite(path, value) && (value < min || value > max)) {
      this.add(path, `must be in [${min}, ${max}], got ${value}`)
    }
  }
  /** In (min, max), with 0 accepted as "the default" (LearnerConfig's zero convention). */
  openOrDefault(path: string, value: number, min: number, max: number): void {
    if (!this.finite(path, value) || value === 0) return
    if (value <= min || value >= max) this.add(path, `must be in (${min}, ${max}), got ${value}`)
  }
  atMost(path: string, value: number, max: number): void {
    if (value > max) this.add(path, `must be <= ${max}, got ${value}`)
  }
  name(path: string, value: string, required: boolean, maxLength = 256): void {
    if (value === "") {
      if (required) this.add(path, "required")
      return
    }
    if (value.length > maxLength) this.add(path, `must be at most ${maxLength} characters`)
    else if (!NAME.test(value)) {
      this.add(
        path,
        `must not contain whitespace or control characters, got ${JSON.stringify(value)}`,
      )
    }
  }
}

const validateSampling = (c: Collector, s: SamplingParams, limits: Limits | undefined): void => {
  c.atLeast("spec.sampling.temperature", s.temperature, 0)
  c.closed("spec.sampling.top_p", s.topP, 0, 1)
  const budget = limits?.maxTokens ?? 0
  if (budget > 0 && s.maxTokens > budget) {
    c.add(
      "spec.sampling.max_tokens",
      `must be <= spec.limits.max_tokens (${budget}), got ${s.maxTokens}`,
    )
  }
  if (s.stopTokenIds.length > MAX_STOP_TOKENS) {
    c.add("spec.sampling.stop_token_ids", `at most ${MAX_STOP_TOKENS} ids`)
  }
}

const validateLimits = (c: Collector, l: Limits): void => {
  if (l.maxTokens > 0 && l.observationMaxTokens > l.maxTokens) {
    c.add(
      "spec.limits.observation_max_tokens",
      `must be <= spec.limits.max_tokens (${l.maxTokens}), got ${l.observationMaxTokens}`,
    )
  }
  if (l.wallClockSec > 0 && l.commandTimeoutMs > l.wallClockSec * 1000) {
    c.add(
      "spec.limits.command_timeout_ms",
      `must be <= spec.limits.wall_clock_sec × 1000 (${l.wallClockSec * 1000}), got ${l.commandTimeoutMs}`,
    )
  }
}

const validateLearner = (c: Collector, l: LearnerConfig, samplesPerTask: number): void => {
  const p = "spec.learner"
  c.openOrDefault(`${p}.clip_eps`, l.clipEps, 0, 1)
  c.atLeast(`${p}.value_clip_eps`, l.valueClipEps, 0)
  c.atLeast(`${p}.entropy_coef`, l.entropyCoef, 0)
  c.closed(`${p}.gamma`, l.gamma, 0, 1)
  c.closed(`${p}.actor_lambda`, l.actorLambda, 0, 1)
  c.closed(`${p}.critic_lambda`, l.criticLambda, 0, 1)
  c.openOrDefault(`${p}.lr`, l.lr, 0, 1)
  c.openOrDefault(`${p}.critic_lr`, l.criticLr, 0, 1)
  if (
    l.tisThreshold !== undefined &&
    c.finite(`${p}.tis_threshold`, l.tisThreshold) &&
    l.tisThreshold !== 0
  ) {
    if (l.tisThreshold < 1) {
      c.add(`${p}.tis_threshold`, `must be 0 (disabled) or >= 1, got ${l.tisThreshold}`)
    }
  }
  c.atLeast(`${p}.max_grad_norm`, l.maxGradNorm, 0)
  if (l.batchTrajectories > 0 && l.minibatches > l.batchTrajectories) {
    c.add(
      `${p}.minibatches`,
      `must be <= spec.learner.batch_trajectories (${l.batchTrajectories}), got ${l.minibatches}`,
    )
  } else if (l.batchTrajectories === 0 && l.minibatches > DEFAULT_BATCH_TRAJECTORIES) {
    c.add(
      `${p}.minibatches`,
      `must be <= the default batch_trajectories (${DEFAULT_BATCH_TRAJECTORIES}), got ${l.minibatches}`,
    )
  }
  c.atMost(`${p}.ppo_epochs`, l.ppoEpochs, MAX_PPO_EPOCHS)
  c.openOrDefault(`${p}.sft_lr`, l.sftLr, 0, 1)
  if (l.evalEverySteps !== 0) {
    c.add(
      `${p}.eval_every_steps`,
      `periodic evaluation during training is not run by the learner or the coordinator: leave it 0 and submit a JOB_KIND_EVAL job with policy_ref set to a published version, got ${l.evalEverySteps}`,
    )
  }
  // Samplers move to new weights only when they are published; a version that is never
  // published cannot be sampled, so the staleness bound must leave room for the gap (else the
  // coordinator stops admitting episodes and the job waits for ever).
  const eta = l.maxStaleness ?? DEFAULT_MAX_STALENESS
  if (l.publishEverySteps > eta + 1) {
    c.add(
      `${p}.publish_every_steps`,
      `must be <= max_staleness + 1 (${eta + 1}): episodes sampled between publications must stay trainable, got ${l.publishEverySteps}`,
    )
  }
  if (AdvantageMode[l.advantageMode] === undefined) {
    c.add(`${p}.advantage_mode`, `must be an AdvantageMode value, got ${l.advantageMode}`)
  } else if (
    (l.advantageMode === AdvantageMode.GROUP || l.advantageMode === AdvantageMode.GROUP_CRITIC) &&
    samplesPerTask < 2
  ) {
    c.add(
      `${p}.advantage_mode`,
      `a group baseline needs spec.samples_per_task >= 2 (rollouts per task to compare), got ${samplesPerTask}`,
    )
  }
  if (l.centerAdvantages !== undefined && l.normalizeAdvantages === false) {
    c.add(
      `${p}.center_advantages`,
      "only applies when the advantages are whitened: leave it unset or set normalize_advantages",
    )
  }
  if (LossAggregation[l.lossAggregation] === undefined) {
    c.add(`${p}.loss_aggregation`, `must be a LossAggregation value, got ${l.lossAggregation}`)
  }
  if (LrSchedule[l.lrSchedule] === undefined) {
    c.add(`${p}.lr_schedule`, `must be an LrSchedule value, got ${l.lrSchedule}`)
  }
  c.closed(`${p}.min_lr_ratio`, l.minLrRatio, 0, 1)
  if (l.lrDecaySteps > 0 && l.lrDecaySteps <= l.lrWarmupSteps) {
    c.add(
      `${p}.lr_decay_steps`,
      `must be > spec.learner.lr_warmup_steps (${l.lrWarmupSteps}), got ${l.lrDecaySteps}`,
    )
  }
}

/**
 * Every problem with a JobSpec, in field order; empty when the spec is valid. Zero values mean
 * "the default" wherever job.proto says so, and are accepted.
 */
export const validateJobSpec = (spec: JobSpec | undefined): Violation[] => {
  const c = new Collector()
  if (spec === undefined) {
    c.add("spec", "required")
    return c.violations
  }
  if (spec.name.length > 256) c.add("spec.name", "must be at most 256 characters")
  else if (/\p{Cc}/u.test(spec.name)) c.add("spec.name", "must not contain control characters")
  if (!JOB_KINDS.includes(spec.kind)) {
    c.add(
      "spec.kind",
      `must be JOB_KIND_TRAIN, JOB_KIND_EVAL, JOB_KIND_ROLLOUT or JOB_KIND_SFT, got ${JobKind[spec.kind] === undefined ? spec.kind : `JOB_KIND_${JobKind[spec.kind]}`}`,
    )
  }
  c.name("spec.task_set", spec.taskSet, true)
  if (spec.taskIds.length > MAX_TASK_IDS) c.add("spec.task_ids", `at most ${MAX_TASK_IDS} ids`)
  const seen = new Map<string, number>()
  spec.taskIds.forEach((id, i) => {
    const path = `spec.task_ids[${i}]`
    c.name(path, id, true)
    const first = seen.get(id)
    if (first !== undefined && id !== "") c.add(path, `duplicate of spec.task_ids[${first}]`)
    else seen.set(id, i)
  })
  if (TaskSplit[spec.split] === undefined) {
    c.add("spec.split", `must be a TaskSplit value, got ${spec.split}`)
  }
  c.name("spec.policy_ref", spec.policyRef, false, 512)
  if (spec.sampling !== undefined) validateSampling(c, spec.sampling, spec.limits)
  if (spec.limits !== undefined) validateLimits(c, spec.limits)
  c.atMost("spec.samples_per_task", spec.samplesPerTask, MAX_SAMPLES_PER_TASK)
  if (spec.kind === JobKind.TRAIN) {
    if (spec.learner === undefined) c.add("spec.learner", "required for JOB_KIND_TRAIN")
    else validateLearner(c, spec.learner, spec.samplesPerTask)
  }
  if (spec.kind === JobKind.SFT) {
    const l = spec.learner
    if (l === undefined) c.add("spec.learner", "required for JOB_KIND_SFT (its sft_steps)")
    else {
      if (l.sftSteps === 0) c.add("spec.learner.sft_steps", "must be > 0 for JOB_KIND_SFT")
      if (l.ppoSteps !== 0)
        c.add(
          "spec.learner.ppo_steps",
          `JOB_KIND_SFT runs no PPO: leave it 0 and train from the result in a JOB_KIND_TRAIN job with policy_ref "job:<id>", got ${l.ppoSteps}`,
        )
      if ((l.criticWarmupSteps ?? 0) !== 0)
        c.add(
          "spec.learner.critic_warmup_steps",
          `JOB_KIND_SFT trains no critic: leave it unset, got ${l.criticWarmupSteps}`,
        )
      c.openOrDefault("spec.learner.sft_lr", l.sftLr, 0, 1)
      if (l.external)
        c.add(
          "spec.learner.external",
          "JOB_KIND_SFT is run by t1's learner (it plays the golden episodes): an external trainer takes JOB_KIND_TRAIN jobs",
        )
    }
  }
  if (spec.kind === JobKind.TRAIN && spec.learner?.external === true && spec.learner.sftSteps > 0)
    c.add(
      "spec.learner.sft_steps",
      `the SFT warm start is t1's learner's (it plays the golden episodes); with learner.external leave it 0 and start from an SFT job's weights (policy_ref "job:<id>"), got ${spec.learner.sftSteps}`,
    )
  if (spec.learner?.external === true && spec.kind !== JobKind.TRAIN && spec.kind !== JobKind.SFT)
    c.add("spec.learner.external", "only JOB_KIND_TRAIN jobs have a learner to take")
  const labels = Object.entries(spec.labels)
  if (labels.length > MAX_LABELS) c.add("spec.labels", `at most ${MAX_LABELS} labels`)
  for (const [key, value] of labels) {
    const path = `spec.labels[${JSON.stringify(key)}]`
    if (!LABEL_KEY.test(key)) {
      c.add(path, "key must match [A-Za-z_][A-Za-z0-9_./-]* and be at most 63 characters")
    } else if (value.length > 256 || /\p{Cc}/u.test(value)) {
      c.add(path, "value must be at most 256 characters without control characters")
    }
  }
  c.atMost("spec.max_episode_attempts", spec.maxEpisodeAttempts, MAX_EPISODE_ATTEMPTS)
  if (spec.evalTaskSet !== "") {
    c.add(
      "spec.eval_task_set",
      `periodic evaluation during training is not run by the learner or the coordinator: leave it empty and submit a JOB_KIND_EVAL job on that task set with policy_ref set to a published version, got ${JSON.stringify(spec.evalTaskSet)}`,
    )
  }
  if (c.violations.length === 0) {
    const bytes = toBinary(JobSpecSchema, spec).byteLength
    if (bytes > MAX_SPEC_BYTES) {
      c.add("spec", `encodes to ${bytes} bytes, more than the ${MAX_SPEC_BYTES} allowed`)
    }
  }
  return c.violations
}

/** A job id as clients send it in GetJob, WatchJob and CancelJob. */
export const validateJobId = (jobId: string, path = "job_id"): Violation | undefined => {
  if (jobId === "") return { fieldPath: path, reason: "required" }
  if (!JOB_ID_PATTERN.test(jobId)) {
    return {
      fieldPath: path,
      reason: `must be 1 to 128 characters of [A-Za-z0-9_-], got ${JSON.stringify(jobId.slice(0, 140))}`,
    }
  }
  return undefined
}

/** SubmitJobRequest.request_id: optional, printable ASCII without spaces. */
export const validateRequestId = (requestId: string): Violation | undefined => {
  if (requestId.length > 128) {
    return { fieldPath: "request_id", reason: "must be at most 128 characters" }
  }
  if (!/^[\x21-\x7e]*$/.test(requestId)) {
    return { fieldPath: "request_id", reason: "must be printable ASCII without spaces" }
  }
  return undefined
}
