import { Data, Effect, Result, Schedule } from "effect"
import {
  type AdamWState,
  type ChatTemplate,
  type Kernels,
  Rng,
  type TinyMoe,
} from "../../model/index.ts"
import { Bus, type BusError, type Subjects } from "../../services/bus/index.ts"
import { Metrics, type MetricsShape } from "../../services/metrics/index.ts"
import { publishWeights } from "../../services/weights/index.ts"
import type { TaskLoadErrors } from "../../tasks/index.ts"
import { type BufferClientError, takeBatch } from "../buffer/index.ts"
import type { JobSpecInvalid } from "../coordinator/index.ts"
import type { GoldenError } from "../golden/index.ts"
import { type CheckpointCorrupt, loadCheckpoint, saveCheckpoint } from "./checkpoint.ts"
import { type TrainingSequence, type TrajectoryMalformed, trainingSequence } from "./decode.ts"
import {
  continuedActorOptimizer,
  dropsZeroVarianceGroups,
  type LearnerConfig,
  type StepMetrics,
  Trainer,
} from "./trainer.ts"

/** The SFT warm start was asked for (sft_steps > 0) but has nothing to train on. */
export class SftUnavailable extends Data.TaggedError("SftUnavailable")<{
  readonly jobId: string
  readonly reason: string
}> {
  override get message(): string {
    return `learner: ${this.jobId}: ${this.reason}`
  }
}

/** Why the golden trajectories of a job could not be made (its tasks, their episodes, the bus). */
export type GoldenSourceError = GoldenError | TaskLoadErrors | JobSpecInvalid | TrajectoryMalformed

export interface LearnerOptions {
  readonly subjects: Subjects
  readonly jobId: string
  readonly config: LearnerConfig
  /** Weights to start from when the job has no checkpoint (e.g. the SFT warm start). */
  readonly initial: TinyMoe
  /**
   * The actor optimiser's moments and step count to continue from (a warm start's), instead of
   * a fresh AdamW whose first steps move every weight by about the learning rate whatever its
   * gradient. Ignored when the job resumes from a checkpoint.
   */
  readonly initialOptimizer?: AdamWState
  readonly initialVersion?: bigint
  /** Trajectories per update. */
  readonly batchSize: number
  /**
   * Sizes each update's batch (trajectories) just before it is taken, in place of `batchSize`:
   * for a driver that admits a varying number of episodes per update (the recipe's dynamic
   * sampling). Asked once per update, however many takes the update needs. 0 ends training
   * before `maxSteps` (a driver out of time): the updates so far are final, checkpointed and
   * announced.
   */
  readonly nextBatchSize?: Effect.Effect<number>
  readonly maxBatchTokens?: number
  /** η: trajectories admitted more than this many versions ago are dropped by the buffer. */
  readonly maxStaleness: number
  readonly wholeGroups?: boolean
  /** Default: the config's group filter (on when the advantages use a group baseline). */
  readonly dropZeroVarianceGroups?: boolean
  /** Rollouts per group (the job's samples_per_task) for whole groups; 0: the buffer's own. */
  readonly groupSize?: number
  /**
   * Golden trajectories for the SFT warm start (config.sftSteps updates before RL, on a job
   * that has no checkpoint yet); asked for only then.
   */
  readonly golden?: Effect.Effect<ReadonlyArray<TrainingSequence>, GoldenSourceError>
  /** Golden trajectories per SFT update (default: batchSize, at most the golden set). */
  readonly sftBatch?: number
  /** Save a checkpoint every this many updates (and after the last). */
  readonly checkpointEvery?: number
  /** Stop after this many updates in total (counting those before a restart); unset = forever. */
  readonly maxSteps?: number
  readonly kernels?: Kernels
  /** Chat template for the TITO-off ablation. */
  readonly template?: ChatTemplate
  /**
   * How long the buffer may wait to fill a batch of `batchSize` (default 2 s: train on what is
   * there). A long wait makes every update a full batch.
   */
  readonly batchWaitMs?: number
  /** Called after every update (job events, progress bars). */
  readonly onStep?: (report: StepReport) => Effect.Effect<void>
  /** Called after every SFT warm-start update (job events, progress bars). */
  readonly onSftStep?: (report: SftStepReport) => Effect.Effect<void>
}

/** One update of the SFT warm start. */
export interface SftStepReport {
  /** 1-based; SFT updates are not counted as learner steps. */
  readonly step: number
  readonly steps: number
  readonly loss: number
  /** Golden trajectories in the update and their tokens. */
  readonly sequences: number
  readonly tokens: number
  readonly seconds: number
  /** The golden set the updates draw from. */
  readonly golden: number
}

export interface StepReport extends StepMetrics {
  /** Episodes whose trajectories this update trained on. */
  readonly episodeIds: ReadonlyArray<string>
  readonly step: number
  readonly version: bigint
  readonly batchId: string
  /** Dropped by the buffer while cutting the batch (Batch.dropped_zero_variance, dropped_stale). */
  readonly bufferDroppedZeroVariance: number
  readonly bufferDroppedStale: number
}

const learnerMetrics = (m: MetricsShape) => {
  const g = (name: string, help: string) => m.gauge({ name: `t1_learner_${name}`, help })
  return {
    steps: m.counter({
      name: "t1_learner_steps_total",
      help: "Updates taken, by phase",
      labelNames: ["phase"],
    }),
    tokens: m.counter({ name: "t1_learner_tokens_total", help: "Tokens trained on" }),
    version: g("policy_version", "Policy version of the latest published weights"),
    diff: g(
      "train_infer_logprob_abs_diff",
      "Mean |log p_learner − log p_sampler| over generated tokens (per sample, averaged), last update",
    ),
    k3: g(
      "mismatch_kl_k3",
      "k3 estimate of KL(sampler ‖ learner) on generated tokens, last update",
    ),
    policyLoss: g("policy_loss", "Clipped policy loss, last update"),
    valueLoss: g("value_loss", "Clipped value loss, last update"),
    ev: g("explained_variance", "Explained variance of the critic, last update"),
    entropy: g("entropy", "Mean policy entropy on generated tokens, last update"),
    clipfrac: g(
      "clipfrac",
      "Fraction of generated tokens where the PPO clip was active, last update",
    ),
    tisClipfrac: g(
      "tis_clipfrac",
      "Fraction of generated tokens whose importance weight hit the TIS threshold, last update",
    ),
    approxKl: g("approx_kl", "k3 estimate of KL(proximal ‖ updated policy), last update"),
    lr: g("lr", "Actor learning rate of the last update (0 during critic warm-up)"),
    skipped: m.counter({
      name: "t1_learner_skipped_steps_total",
      help: "Updates that changed no weights, by reason",
      labelNames: ["reason"],
    }),
    sftLoss: g("sft_loss", "Loss of the last SFT warm-start update"),
    reward: g("reward_mean", "Mean reward of the last batch"),
    resolved: g("resolved_rate", "Share of resolved episodes in the last batch"),
    tokensPerSecond: g("tokens_per_second", "Training throughput of the last update"),
    staleness: g("staleness_mean", "Mean policy lag of the last batch's trajectories"),
  }
}

/**
 * The learner actor: takes batches from the job's buffer, runs the update (critic warm-up, then
 * PPO), publishes every new version's weights with an announcement, and checkpoints weights,
 * optimiser and the buffer cursor; on start it resumes from the job's latest checkpoint.
 */
export const runLearner = (
  options: LearnerOptions,
): Effect.Effect<
  { steps: number; version: bigint },
  BusError | BufferClientError | CheckpointCorrupt | SftUnavailable | GoldenSourceError,
  Bus | Metrics
> =>
  Effect.gen(function* () {
    const bus = yield* Bus
    const m = learnerMetrics(yield* Metrics)
    const bucket = `${options.subjects.prefix}-checkpoints`
    const restored = yield* loadCheckpoint(
      bus,
      bucket,
      options.jobId,
      options.config,
      options.kernels,
    )
    const trainer =
      restored?.trainer ??
      new Trainer(
        options.initial,
        options.config,
        options.initialOptimizer === undefined
          ? undefined
          : continuedActorOptimizer(options.initial, options.config, options.initialOptimizer),
      )
    trainer.template = options.template
    let version = restored?.version ?? options.initialVersion ?? 0n
    let lastBatchId = restored?.lastBatchId ?? ""
    // The weights and the checkpoint at the current update (what a call finds then).
    const announce = () =>
      publishWeights(
        bus,
        options.subjects,
        options.jobId,
        trainer.model,
        version,
        BigInt(trainer.step),
      )
    const save = () => saveCheckpoint(bus, bucket, options.jobId, trainer, version, lastBatchId)
    if (restored)
      yield* Effect.logInfo(
        `learner: ${options.jobId} resumed at step ${trainer.step}, version ${version}`,
      )
    if (!restored && options.config.sftSteps > 0) {
      // The warm start comes before the first announcement: the job's starting version (the
      // one its first episodes are sampled with) is the warm-started policy.
      yield* sftWarmStartSteps(trainer, options, m.sftLoss)
      // Saved now, so that a restart does not run the warm start again.
      yield* save()
    }
    // Announced again after a restart: the last one may have died with the previous process.
    yield* announce()
    m.version.set(Number(version))
    const every = options.checkpointEvery ?? 10
    const publishEvery = Math.max(1, options.config.publishEverySteps)
    // Episodes trained on since this process resumed (what a restart rolls back is trained again).
    const trainedOn = new Set<string>()
    // The size of the update being gathered: kept across takes that come back empty.
    let size: number | undefined
    // The step of the last checkpoint and of the last announcement: an early end (a batch size
    // of 0) stores and announces what the last updates did if their turn had not come yet.
    let savedStep = trainer.step
    let announcedStep = trainer.step
    while (options.maxSteps === undefined || trainer.step < options.maxSteps) {
      if (size === undefined)
        size = options.nextBatchSize ? yield* options.nextBatchSize : options.batchSize
      if (size === 0) {
        if (trainer.step > savedStep) yield* save()
        if (trainer.step > announcedStep) yield* announce()
        yield* Effect.logInfo(
          `learner: ${options.jobId}: training ended by its driver after ${trainer.step} updates, version ${version}`,
        )
        break
      }
      const batch = yield* takeBatch(bus, options.subjects, {
        jobId: options.jobId,
        maxTrajectories: size,
        maxTokens: options.maxBatchTokens ?? 0,
        policyVersion: version,
        maxStaleness: options.maxStaleness,
        waitMs: options.batchWaitMs ?? 2000,
        wholeGroups: options.wholeGroups ?? false,
        dropZeroVarianceGroups:
          options.dropZeroVarianceGroups ?? dropsZeroVarianceGroups(options.config),
        groupSize: options.groupSize ?? 0,
        ackBatchId: lastBatchId,
      }).pipe(
        Effect.retry({
          while: (e) => e._tag === "NoResponders" || e._tag === "RequestTimeout",
          schedule: Schedule.spaced("1 second"),
        }),
      )
      const malformed: TrajectoryMalformed[] = []
      // A batch confirmed late (an update slower than the buffer's batch timeout) is served
      // again; what this learner already trained on is not trained twice.
      const weighted = batch.trajectories.map((t, i) => ({ t, weight: batch.weights[i] ?? 1 }))
      const fresh = weighted.filter(({ t }) => !trainedOn.has(t.episodeId))
      if (fresh.length < batch.trajectories.length)
        yield* Effect.logWarning(
          `learner: ${batch.trajectories.length - fresh.length} re-served trajectories already trained on; skipped`,
        )
      const sequences = fresh.flatMap(({ t, weight }) => {
        const s = trainingSequence(t, version, weight)
        // One bad trajectory is dropped with a warning; it must not stop the job's training.
        if (Result.isFailure(s)) {
          malformed.push(s.failure)
          return []
        }
        return s.success ? [s.success] : []
      })
      for (const e of malformed) yield* Effect.logWarning(`learner: dropped ${e.message}`)
      // The buffer waited up to wait_ms; train on what it had, or ask again. A batch with
      // nothing to train on is still confirmed by the next take, or it would come back after
      // every batch timeout. When it held new episodes (none generated a token, or all were
      // malformed), or the buffer dropped every group it had as zero-variance, the update is a
      // skipped step: the version still advances, so the coordinator admits new episodes in
      // place of the consumed ones instead of waiting for ever.
      if (sequences.length === 0) {
        if (batch.batchId !== "") lastBatchId = batch.batchId
        const filtered = batch.droppedZeroVariance > 0
        if (fresh.length === 0 && !filtered) continue
      }
      const metrics =
        sequences.length === 0
          ? trainer.skipStep(
              fresh.length === 0 ? "all_groups_filtered" : "no_trainable_tokens",
              [],
              { sequences: fresh.length },
            )
          : trainer.ppoStep(sequences)
      for (const { t } of fresh) trainedOn.add(t.episodeId)
      size = undefined
      version += 1n
      lastBatchId = batch.batchId
      m.steps.inc({ phase: metrics.phase })
      m.tokens.inc(metrics.tokens)
      m.version.set(Number(version))
      m.diff.set(metrics.trainInferLogprobAbsDiff)
      m.k3.set(metrics.mismatchKlK3)
      m.policyLoss.set(metrics.policyLoss)
      m.valueLoss.set(metrics.valueLoss)
      m.ev.set(metrics.explainedVariance)
      m.entropy.set(metrics.entropy)
      m.clipfrac.set(metrics.clipfrac)
      m.tisClipfrac.set(metrics.tisClipfrac)
      m.approxKl.set(metrics.approxKl)
      m.lr.set(metrics.lr)
      if (metrics.skipped) {
        m.skipped.inc({ reason: metrics.skipReason })
        yield* Effect.logWarning(
          `learner: step ${trainer.step} v${version} skipped (${metrics.skipReason}): ${metrics.sequences} trajectories, ${metrics.droppedZeroVariance + batch.droppedZeroVariance} in zero-variance groups, ${metrics.droppedInvalid} unusable; weights unchanged`,
        )
      }
      if (metrics.droppedOutOfVocab > 0)
        yield* Effect.logWarning(
          `learner: step ${trainer.step}: ${metrics.droppedOutOfVocab} of ${metrics.sequences} trajectories dropped: token ids beyond the model's ${trainer.model.config.vocabSize}-id vocabulary (the samplers' policy has a larger one)`,
        )
      m.reward.set(metrics.rewardMean)
      m.resolved.set(metrics.resolvedRate)
      m.tokensPerSecond.set(metrics.tokens / Math.max(1e-3, metrics.seconds))
      m.staleness.set(metrics.stalenessMean)
      if (trainer.step === options.config.criticWarmupSteps && metrics.phase === "critic_warmup") {
        yield* Effect.logInfo(
          `learner: critic warm-up done after ${trainer.step} updates; PPO updates the policy from now on`,
        )
      }
      yield* Effect.logInfo(
        `learner: step ${trainer.step} (${metrics.phase}) v${version}: ${sequences.length} trajectories, reward ${metrics.rewardMean.toFixed(2)} (per test ${metrics.trainRewardMean.toFixed(3)}), policy loss ${metrics.policyLoss.toFixed(4)}, value loss ${metrics.valueLoss.toFixed(4)}, clipfrac ${metrics.clipfrac.toFixed(3)}, approx KL ${metrics.approxKl.toExponential(2)}, |Δlogp| ${metrics.trainInferLogprobAbsDiff.toExponential(2)}`,
      )
      // The step's event, then its checkpoint, then its announcement: the coordinator may end
      // the job on the announcement of the last step, and by then both must be stored.
      if (options.onStep)
        yield* options.onStep({
          ...metrics,
          episodeIds: metrics.trainedEpisodeIds,
          step: trainer.step,
          version,
          batchId: batch.batchId,
          bufferDroppedZeroVariance: batch.droppedZeroVariance,
          bufferDroppedStale: batch.droppedStale,
        })
      const last = options.maxSteps !== undefined && trainer.step >= options.maxSteps
      if (trainer.step % every === 0 || last) {
        yield* save()
        savedStep = trainer.step
      }
      if (trainer.step % publishEvery === 0 || last) {
        announcedStep = trainer.step
        yield* announce()
      }
    }
    return { steps: trainer.step, version }
  })

/**
 * The SFT warm start of a job: config.sftSteps updates on golden trajectories, each on a
 * seeded draw of sftBatch of them (without replacement within an update).
 */
const sftWarmStartSteps = (
  trainer: Trainer,
  options: LearnerOptions,
  loss: { set: (x: number) => void },
): Effect.Effect<void, SftUnavailable | GoldenSourceError> =>
  Effect.gen(function* () {
    const steps = options.config.sftSteps
    if (options.golden === undefined)
      return yield* new SftUnavailable({
        jobId: options.jobId,
        reason: `sft_steps is ${steps} but this learner has no golden trajectories`,
      })
    const golden = yield* options.golden
    if (golden.length === 0)
      return yield* new SftUnavailable({
        jobId: options.jobId,
        reason: `sft_steps is ${steps} but there are no golden trajectories (no task was resolved by its reference solution)`,
      })
    const size = Math.max(1, Math.min(options.sftBatch ?? options.batchSize, golden.length))
    const rng = new Rng(options.config.seed ^ 0x5f7)
    yield* Effect.logInfo(
      `learner: ${options.jobId}: SFT warm start, ${steps} updates on ${golden.length} golden trajectories`,
    )
    let first: number | undefined
    let last = 0
    for (let i = trainer.sftStepsDone; i < steps; i++) {
      const pool = [...golden]
      const picked: TrainingSequence[] = []
      for (let k = 0; k < size; k++)
        picked.push(pool.splice(Math.floor(rng.next() * pool.length), 1)[0] as TrainingSequence)
      const started = performance.now()
      last = trainer.sftStep(picked).loss
      first ??= last
      loss.set(last)
      if (options.onSftStep)
        yield* options.onSftStep({
          step: i + 1,
          steps,
          loss: last,
          sequences: picked.length,
          tokens: picked.reduce((n, p) => n + p.ids.length, 0),
          seconds: (performance.now() - started) / 1000,
          golden: golden.length,
        })
      yield* Effect.yieldNow
    }
    yield* Effect.logInfo(
      `learner: ${options.jobId}: SFT warm start done, loss ${first?.toFixed(3)} → ${last.toFixed(3)}`,
    )
  })
