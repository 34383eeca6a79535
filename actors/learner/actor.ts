import { Effect, Schedule } from "effect"
import type { ChatTemplate, Kernels, TinyMoe } from "../../model/index.ts"
import { Bus, type Subjects } from "../../services/bus/index.ts"
import { Metrics, type MetricsShape } from "../../services/metrics/index.ts"
import { takeBatch } from "../buffer/client.ts"
import { loadCheckpoint, saveCheckpoint } from "./checkpoint.ts"
import { TrajectoryMalformed, trainingSequence } from "./decode.ts"
import { type LearnerConfig, type StepMetrics, Trainer } from "./trainer.ts"
import { publishWeights } from "./weights.ts"

export interface LearnerOptions {
  readonly subjects: Subjects
  readonly jobId: string
  readonly config: LearnerConfig
  /** Weights to start from when the job has no checkpoint (e.g. the SFT warm start). */
  readonly initial: TinyMoe
  readonly initialVersion?: bigint
  /** Trajectories per update. */
  readonly batchSize: number
  readonly maxBatchTokens?: number
  /** η: trajectories admitted more than this many versions ago are dropped by the buffer. */
  readonly maxStaleness: number
  readonly wholeGroups?: boolean
  readonly dropZeroVarianceGroups?: boolean
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
}

export interface StepReport extends StepMetrics {
  /** Episodes whose trajectories this update trained on. */
  readonly episodeIds: ReadonlyArray<string>
  readonly step: number
  readonly version: bigint
  readonly batchId: string
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
): Effect.Effect<{ steps: number; version: bigint }, unknown, Bus | Metrics> =>
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
    const trainer = restored?.trainer ?? new Trainer(options.initial, options.config)
    trainer.template = options.template
    let version = restored?.version ?? options.initialVersion ?? 0n
    let lastBatchId = restored?.lastBatchId ?? ""
    if (restored)
      yield* Effect.logInfo(
        `learner: ${options.jobId} resumed at step ${trainer.step}, version ${version}`,
      )
    // Announced again after a restart: the last one may have died with the previous process.
    yield* publishWeights(
      bus,
      options.subjects,
      options.jobId,
      trainer.model,
      version,
      BigInt(trainer.step),
    )
    m.version.set(Number(version))
    const every = options.checkpointEvery ?? 10
    // Episodes trained on since this process resumed (what a restart rolls back is trained again).
    const trainedOn = new Set<string>()
    while (options.maxSteps === undefined || trainer.step < options.maxSteps) {
      const batch = yield* takeBatch(bus, options.subjects, {
        jobId: options.jobId,
        maxTrajectories: options.batchSize,
        maxTokens: options.maxBatchTokens ?? 0,
        policyVersion: version,
        maxStaleness: options.maxStaleness,
        waitMs: options.batchWaitMs ?? 2000,
        wholeGroups: options.wholeGroups ?? false,
        dropZeroVarianceGroups: options.dropZeroVarianceGroups ?? false,
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
      const fresh = batch.trajectories.filter((t) => !trainedOn.has(t.episodeId))
      if (fresh.length < batch.trajectories.length)
        yield* Effect.logWarning(
          `learner: ${batch.trajectories.length - fresh.length} re-served trajectories already trained on; skipped`,
        )
      const sequences = fresh.flatMap((t) => {
        try {
          const s = trainingSequence(t, version)
          return s ? [s] : []
        } catch (e) {
          // One bad trajectory is dropped with a warning; it must not stop the job's training.
          if (e instanceof TrajectoryMalformed) {
            malformed.push(e)
            return []
          }
          throw e
        }
      })
      for (const e of malformed) yield* Effect.logWarning(`learner: dropped ${e.message}`)
      // The buffer waited up to wait_ms; train on what it had, or ask again. A batch with
      // nothing to train on (no generated tokens, re-served, malformed) is still confirmed by
      // the next take, or it would come back after every batch timeout.
      if (sequences.length === 0) {
        if (batch.batchId !== "") lastBatchId = batch.batchId
        continue
      }
      const metrics = trainer.ppoStep(sequences)
      for (const q of sequences) trainedOn.add(q.episodeId)
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
        `learner: step ${trainer.step} (${metrics.phase}) v${version}: ${sequences.length} trajectories, reward ${metrics.rewardMean.toFixed(2)}, policy loss ${metrics.policyLoss.toFixed(4)}, value loss ${metrics.valueLoss.toFixed(4)}, |Δlogp| ${metrics.trainInferLogprobAbsDiff.toExponential(2)}`,
      )
      // The step's event, then its checkpoint, then its announcement: the coordinator may end
      // the job on the announcement of the last step, and by then both must be stored.
      if (options.onStep)
        yield* options.onStep({
          ...metrics,
          episodeIds: sequences.map((q) => q.episodeId),
          step: trainer.step,
          version,
          batchId: batch.batchId,
        })
      const last = options.maxSteps !== undefined && trainer.step >= options.maxSteps
      if (trainer.step % every === 0 || last)
        yield* saveCheckpoint(bus, bucket, options.jobId, trainer, version, lastBatchId)
      yield* publishWeights(
        bus,
        options.subjects,
        options.jobId,
        trainer.model,
        version,
        BigInt(trainer.step),
      )
    }
    return { steps: trainer.step, version }
  })
