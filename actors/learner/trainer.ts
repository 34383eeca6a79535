import {
  AdamW,
  type AdamWState,
  addGrads,
  type ChatTemplate,
  type Floats,
  type Params,
  paramEntries,
  supervisedGradients,
  type TinyMoe,
} from "../../model/index.ts"
import { DEFAULT_CRITIC_WARMUP_STEPS } from "../../services/jobs/index.ts"
import type { TrainingSequence } from "./decode.ts"
import {
  type AdvantageMode,
  batchAdvantages,
  explainedVariance,
  type LrScheduleKind,
  lrFactor,
  minibatchOrder,
  mismatchKlK3,
  mixSeed,
  policyWeightFor,
  ppoLoss,
  rewardPerTest,
  type TrainPhase,
  type TrajectoryRows,
  temperedLogprobs,
  trainInferLogprobAbsDiff,
  trainPhase,
  trajectoryRows,
  zeroVarianceMembers,
} from "./ppo/index.ts"
import { retokenizedSequence } from "./retokenize.ts"

export { DEFAULT_CRITIC_WARMUP_STEPS }

/** The value head: the critic's own parameters (the trunk is shared with the policy). */
export const CRITIC_PARAMS: ReadonlySet<string> = new Set(["valueHead", "valueBias"])

/**
 * How advantages are estimated:
 * - `critic`: GAE(γ, actorLambda) with the critic's values (actor-critic PPO, the T1 recipe);
 * - `group`: leave-one-out group baseline (RLOO) — the trajectory's reward minus the mean of the
 *   other samples of its group, on every generated token; the critic is trained but not used;
 * - `group+critic`: GAE with the critic on the group-centred reward.
 */
export type { AdvantageMode }

export const DEFAULT_PPO_EPOCHS = 2
export const DEFAULT_MINIBATCHES = 2
export const DEFAULT_ADVANTAGE_MODE: AdvantageMode = "critic"
export const DEFAULT_SFT_LR = 3e-3
export const DEFAULT_MIN_LR_RATIO = 0.1

export interface LearnerConfig {
  /** The actor's (policy and shared trunk) learning rate. */
  readonly lr: number
  /** The critic's (value head) learning rate. */
  readonly criticLr: number
  readonly weightDecay: number
  /** Global gradient-norm clip of every optimiser step; 0 disables clipping. */
  readonly maxGradNorm: number
  readonly gamma: number
  /** GAE λ of the actor's advantages. */
  readonly actorLambda: number
  /** GAE λ of the critic's return targets (1: Monte-Carlo returns). */
  readonly criticLambda: number
  readonly clipLow: number
  readonly clipHigh: number
  /** Clip of V − V_old in the value loss, V_old the values at the start of the update. */
  readonly valueClip: number | undefined
  readonly valueCoef: number
  readonly entropyCoef: number
  /** Truncated importance sampling threshold C (token level); undefined disables TIS. */
  readonly tisThreshold: number | undefined
  /** The sampler's temperature: log-probs are compared and trained at it. */
  readonly temperature: number
  /** Multiplies the (per-test) reward. */
  readonly rewardScale: number
  /**
   * What a trajectory's reward is: `dense`, its passing tests over the task's tests (partial
   * progress counts; the raw count stays in the episode events); `binary`, 1 when every test
   * passed and 0 otherwise (the ablation).
   */
  readonly rewardKind: RewardKind
  /** R3: replay the sampler's routing at every position. */
  readonly replayRouting: boolean
  /**
   * TITO: train on the sampled ids. Off (the ablation), each trajectory is re-rendered from its
   * text and re-tokenised (needs `Trainer.template`), and R3 cannot apply.
   */
  readonly tito: boolean
  readonly auxLossCoef: number
  /** SFT updates on golden trajectories before RL (run by the learner actor, see sftStep). */
  readonly sftSteps: number
  /** Learning rate of the SFT updates. */
  readonly sftLr: number
  readonly criticWarmupSteps: number
  /** Passes over each batch. */
  readonly ppoEpochs: number
  /** Optimiser steps per epoch: the batch's sequences are split into this many minibatches. */
  readonly minibatches: number
  readonly advantageMode: AdvantageMode
  /** Whiten advantages over the batch's generated tokens (mean 0, std 1). */
  readonly normalizeAdvantages: boolean
  /**
   * With normalizeAdvantages: subtract the mean over generated tokens (true) or only scale by the
   * std (false); undefined: centre exactly when the advantage mode has no group baseline. A group
   * (RLOO) baseline already centres each group; subtracting the token-weighted mean again moves
   * every advantage by an amount set by episode lengths (long failures drag it down and so lift
   * themselves towards 0).
   */
  readonly centerAdvantages: boolean | undefined
  /**
   * How the policy loss weighs trajectories: `token`, every generated token of a minibatch alike
   * (a long trajectory weighs in proportion to its length); `sequence`, every trajectory alike
   * (each one's advantages scaled by the batch's mean generated length over its own, so a long
   * failed episode pushes on each of its tokens less and no more in all than a short one).
   */
  readonly lossAggregation: LossAggregation
  /**
   * Drop groups of ≥ 2 trajectories whose rewards are all equal (here and, through the take
   * request, in the buffer); undefined: on exactly when the advantage mode uses a group baseline.
   */
  readonly dropZeroVarianceGroups: boolean | undefined
  /** Learning-rate schedule over the PPO updates (critic warm-up runs at the base critic lr). */
  readonly lrSchedule: LrScheduleKind
  readonly lrWarmupSteps: number
  /** Cosine: PPO updates until the floor; 0 = no decay. */
  readonly lrDecaySteps: number
  readonly minLrRatio: number
  /** The learner actor publishes weights every this many updates (and after the last). */
  readonly publishEverySteps: number
  /** Seeds the minibatch shuffles (with the update count and the epoch). */
  readonly seed: number
}

export const DEFAULT_LEARNER_CONFIG: LearnerConfig = {
  lr: 3e-4,
  criticLr: 3e-4,
  weightDecay: 0.01,
  maxGradNorm: 1,
  gamma: 1,
  actorLambda: 0.95,
  criticLambda: 1,
  clipLow: 0.2,
  clipHigh: 0.28,
  valueClip: 0.2,
  valueCoef: 0.5,
  entropyCoef: 0.001,
  tisThreshold: 2,
  temperature: 1,
  rewardScale: 1,
  rewardKind: "dense",
  replayRouting: true,
  tito: true,
  auxLossCoef: 0.01,
  sftSteps: 0,
  sftLr: DEFAULT_SFT_LR,
  criticWarmupSteps: DEFAULT_CRITIC_WARMUP_STEPS,
  ppoEpochs: DEFAULT_PPO_EPOCHS,
  minibatches: DEFAULT_MINIBATCHES,
  advantageMode: DEFAULT_ADVANTAGE_MODE,
  normalizeAdvantages: true,
  centerAdvantages: undefined,
  lossAggregation: "token",
  dropZeroVarianceGroups: undefined,
  lrSchedule: "constant",
  lrWarmupSteps: 0,
  lrDecaySteps: 0,
  minLrRatio: DEFAULT_MIN_LR_RATIO,
  publishEverySteps: 1,
  seed: 0,
}

export type RewardKind = "dense" | "binary"

export type LossAggregation = "token" | "sequence"

/** The reward a sequence is trained on (before rewardScale), see LearnerConfig.rewardKind. */
export const trainedReward = (
  s: Pick<TrainingSequence, "reward" | "testsTotal" | "resolved">,
  kind: RewardKind,
): number => (kind === "binary" ? (s.resolved ? 1 : 0) : rewardPerTest(s.reward, s.testsTotal))

/** Whether whitening subtracts the mean under `config` (see centerAdvantages). */
export const centersAdvantages = (config: LearnerConfig): boolean =>
  config.centerAdvantages ?? config.advantageMode === "critic"

/** Whether zero-variance groups are dropped under `config` (see dropZeroVarianceGroups). */
export const dropsZeroVarianceGroups = (config: LearnerConfig): boolean =>
  config.dropZeroVarianceGroups ?? config.advantageMode !== "critic"

/** Why an update changed no weights. */
export type SkipReason =
  /** Nothing in the batch was generated by the policy (or the batch was empty). */
  | "no_trainable_tokens"
  /** Every group had equal rewards and was dropped (here or by the buffer). */
  | "all_groups_filtered"
  /** The loss or the gradients were NaN or infinite in every minibatch. */
  | "non_finite"

/** Statistics of one epoch's minibatch steps (token-weighted means over its minibatches). */
export interface EpochMetrics {
  readonly policyLoss: number
  readonly valueLoss: number
  readonly entropy: number
  readonly clipfrac: number
  readonly approxKl: number
  readonly ratioMean: number
  readonly ratioMin: number
  readonly ratioMax: number
  readonly valueClipfrac: number
  /** Minibatch steps of the epoch left out because their loss or gradients were not finite. */
  readonly skippedMinibatches: number
}

export interface StepMetrics {
  readonly phase: TrainPhase
  readonly sequences: number
  readonly tokens: number
  readonly actionTokens: number
  /** Means over every minibatch step of the update (all epochs), weighted by tokens. */
  readonly loss: number
  readonly policyLoss: number
  readonly valueLoss: number
  readonly entropy: number
  readonly clipfrac: number
  readonly tisClipfrac: number
  readonly approxKl: number
  readonly ratioMean: number
  readonly ratioMin: number
  readonly ratioMax: number
  readonly valueClipfrac: number
  /** One entry per epoch: the first is on-policy (ratio 1), later ones show the clip at work. */
  readonly epochs: ReadonlyArray<EpochMetrics>
  /** The critic's values at the start of the update against its targets. */
  readonly explainedVariance: number
  readonly trainInferLogprobAbsDiff: number
  readonly mismatchKlK3: number
  /** Global gradient norm (before clipping), mean over the optimiser steps. */
  readonly gradNorm: number
  readonly optimizerSteps: number
  /** Learning rates of the update (after the schedule). */
  readonly lr: number
  readonly criticLr: number
  /** Mean raw reward (passing tests) of the batch. */
  readonly rewardMean: number
  /** Mean reward as trained on (per test, times rewardScale). */
  readonly trainRewardMean: number
  readonly resolvedRate: number
  readonly stalenessMean: number
  /** Mean loss weight (staleness down-weighting) of the trained trajectories. */
  readonly weightMean: number
  /** Advantages over generated tokens before normalisation. */
  readonly advantageMean: number
  readonly advantageStd: number
  /** Trajectories dropped by the learner's zero-variance group filter. */
  readonly droppedZeroVariance: number
  /** Trajectories dropped as unusable (non-finite sampler log-probs, nothing left after re-tokenising). */
  readonly droppedInvalid: number
  /**
   * Of droppedInvalid: trajectories holding a token id the model has no row for (a policy with a
   * larger vocabulary; the learner pool refuses such a job at admission when it knows the
   * policy's vocabulary).
   */
  readonly droppedOutOfVocab: number
  /** Trajectories without a group-mate (no group baseline; advantage 0 in `group` mode). */
  readonly ungrouped: number
  /** Episodes whose trajectories the update trained on (none when skipped). */
  readonly trainedEpisodeIds: ReadonlyArray<string>
  readonly skipped: boolean
  /** Empty unless skipped. */
  readonly skipReason: SkipReason | ""
  readonly seconds: number
}

/** A sequence made ready for the update: rows, reward, and (after the first pass) its targets. */
interface Prepared {
  readonly source: TrainingSequence
  readonly ids: Uint32Array
  readonly replay: Uint8Array | Uint16Array | undefined
  readonly rows: TrajectoryRows
  readonly actionCount: number
  readonly reward: number
  readonly weight: number
  prox: Float64Array
  oldValues: Float64Array
  advantages: Float64Array
  returns: Float64Array
}

const finiteAll = (a: ArrayLike<number>): boolean => {
  for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i] as number)) return false
  return true
}

/** Token-weighted accumulators of the loss statistics. */
class Stats {
  tokens = 0
  rows = 0
  policyLoss = 0
  valueLoss = 0
  entropy = 0
  clipfrac = 0
  tisClipfrac = 0
  approxKl = 0
  ratio = 0
  ratioMin = Number.POSITIVE_INFINITY
  ratioMax = Number.NEGATIVE_INFINITY
  valueClipped = 0
  valueRows = 0
  loss = 0
  steps = 0
  skipped = 0

  add(o: Stats): void {
    this.tokens += o.tokens
    this.rows += o.rows
    this.policyLoss += o.policyLoss
    this.valueLoss += o.valueLoss
    this.entropy += o.entropy
    this.clipfrac += o.clipfrac
    this.tisClipfrac += o.tisClipfrac
    this.approxKl += o.approxKl
    this.ratio += o.ratio
    this.ratioMin = Math.min(this.ratioMin, o.ratioMin)
    this.ratioMax = Math.max(this.ratioMax, o.ratioMax)
    this.valueClipped += o.valueClipped
    this.valueRows += o.valueRows
    this.loss += o.loss
    this.steps += o.steps
    this.skipped += o.skipped
  }

  perToken(x: number): number {
    return this.tokens === 0 ? 0 : x / this.tokens
  }

  epoch(): EpochMetrics {
    return {
      policyLoss: this.perToken(this.policyLoss),
      valueLoss: this.rows === 0 ? 0 : this.valueLoss / this.rows,
      entropy: this.perToken(this.entropy),
      clipfrac: this.perToken(this.clipfrac),
      approxKl: this.perToken(this.approxKl),
      ratioMean: this.tokens === 0 ? 1 : this.ratio / this.tokens,
      ratioMin: this.tokens === 0 ? 1 : this.ratioMin,
      ratioMax: this.tokens === 0 ? 1 : this.ratioMax,
      valueClipfrac: this.valueRows === 0 ? 0 : this.valueClipped / this.valueRows,
      skippedMinibatches: this.skipped,
    }
  }
}

/** Mean raw reward of a batch (a non-finite one counts as 0; such a trajectory is dropped). */
const rewardMeanOf = (batch: ReadonlyArray<TrainingSequence>): number =>
  batch.reduce((a, b) => a + (Number.isFinite(b.reward) ? b.reward : 0), 0) /
  Math.max(1, batch.length)

const gradNormOf = (grads: ReadonlyArray<{ data: Floats }>): number => {
  let sq = 0
  for (const g of grads) for (let i = 0; i < g.data.length; i++) sq += (g.data[i] as number) ** 2
  return Math.sqrt(sq)
}

/** Every element of every array is finite. */
const allFinite = (...arrays: ReadonlyArray<ArrayLike<number>>): boolean => {
  for (const a of arrays)
    for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i])) return false
  return true
}

/**
 * One learner: the policy/critic, its two optimisers and the update count.
 *
 * A PPO update (`ppoStep`) on a batch of trajectories:
 * 1. drops what cannot be trained (zero-variance groups when the group filter is on, non-finite
 *    sampler log-probs) and computes each trajectory's reward as passing tests / tests;
 * 2. scores every sequence ONCE with the weights at the start of the update (no tape; the
 *    sampler's routing replayed under R3): the proximal log-probs π_prox and the old values;
 * 3. builds advantages (critic GAE, leave-one-out group baseline, or GAE on group-centred
 *    rewards), whitens them over the batch's generated tokens when asked, and multiplies each
 *    trajectory's by its staleness weight (so its policy loss is weighted);
 * 4. runs `ppoEpochs` epochs of `minibatches` optimiser steps over a seeded shuffle of the
 *    sequences: clipped surrogate against π_prox, times the truncated importance weight
 *    min(π_prox / π_behaviour, C) (decoupled PPO, as AReaL), value loss clipped around the old
 *    values, entropy bonus; one global gradient-norm clip per step; the actor (trunk and policy)
 *    and the critic (value head) have their own AdamW and learning rate, both on the schedule.
 * During critic warm-up only the value head is stepped (policy weight 0). Every call counts as
 * one update, also one that is skipped (reported with `skipped` and a reason).
 */
export class Trainer {
  /** AdamW over every parameter except the value head. */
  readonly optimizer: AdamW
  /** AdamW over the value head, at the critic's learning rate. */
  readonly criticOptimizer: AdamW
  /** RL updates taken (critic warm-up and PPO; skipped ones included). */
  step = 0
  /** SFT updates taken (not counted in `step`). */
  sftStepsDone = 0
  /** The chat template, for the TITO-off ablation (re-rendering from text). */
  template: ChatTemplate | undefined

  constructor(
    readonly model: TinyMoe,
    readonly config: LearnerConfig,
    optimizer?: AdamW,
    criticOptimizer?: AdamW,
  ) {
    this.optimizer = optimizer ?? actorOptimizer(model, config)
    this.criticOptimizer = criticOptimizer ?? criticOptimizerFor(model, config)
  }

  /** The phase of the next update: critic warm-up for the first criticWarmupSteps, then PPO. */
  get phase(): TrainPhase {
    return trainPhase(this.step, { sftSteps: 0, criticWarmupSteps: this.config.criticWarmupSteps })
  }

  /** Actor and critic learning rates of the next update (the schedule runs over PPO updates). */
  learningRates(): { lr: number; criticLr: number } {
    const c = this.config
    if (this.phase !== "ppo") return { lr: 0, criticLr: c.criticLr }
    const f = lrFactor(this.step - c.criticWarmupSteps, {
      kind: c.lrSchedule,
      warmupSteps: c.lrWarmupSteps,
      decaySteps: c.lrDecaySteps,
      minRatio: c.minLrRatio,
    })
    return { lr: c.lr * f, criticLr: c.criticLr * f }
  }

  /**
   * Supervised warm start on golden trajectories: next-token loss on the generated (loss mask 1)
   * tokens only, averaged over them, with the sampler's routing replayed when recorded; one
   * actor optimiser step at `lr` (default config.sftLr), gradient norm clipped. Counted in
   * `sftStepsDone`, not in `step`.
   */
  sftStep(
    batch: ReadonlyArray<TrainingSequence>,
    lr?: number,
  ): { loss: number; gradNorm: number; tokens: number } {
    let total = 0
    for (const s of batch)
      for (let i = 1; i < s.lossMask.length; i++) total += s.lossMask[i] as number
    const scale = 1 / Math.max(1, total)
    const { loss, grads } = supervisedGradients(
      this.model,
      batch.map((s) => ({
        ids: s.ids,
        weights: Array.from(s.lossMask.subarray(1), (m) => m * scale),
        ...(this.config.replayRouting && s.routing ? { routing: s.routing } : {}),
      })),
      this.config.auxLossCoef,
    )
    this.sftStepsDone++
    if (!grads || total === 0) return { loss, gradNorm: 0, tokens: total }
    const actor = paramEntries(this.model.config, grads).filter((e) => !CRITIC_PARAMS.has(e.name))
    const norm = gradNormOf(actor)
    if (!Number.isFinite(norm) || !Number.isFinite(loss)) return { loss, gradNorm: norm, tokens: 0 }
    const clip = this.clipScale(norm)
    this.optimizer.step(
      new Map(actor.map((e) => [e.name, scaled(e.data, clip)])),
      lr ?? this.config.sftLr,
    )
    return { loss, gradNorm: norm, tokens: total }
  }

  /** Learner log-probs (at the sampler's temperature) of each sequence's rows, for alignment metrics. */
  score(sequence: TrainingSequence, replay = this.config.replayRouting): Float64Array {
    const n = sequence.ids.length
    const result = this.model.score(sequence.ids.subarray(0, n - 1), {
      tape: false,
      ...(replay && sequence.routing ? { replay: sequence.routing } : {}),
    })
    return temperedLogprobs(
      result.logits,
      this.model.config.vocabSize,
      sequence.ids.subarray(1),
      this.config.temperature,
    )
  }

  private clipScale(norm: number): number {
    const max = this.config.maxGradNorm
    return max > 0 && norm > max ? max / norm : 1
  }

  /**
   * Rows, reward and weight of a sequence; undefined when it cannot be trained on,
   * "out_of_vocab" when a token id is outside the model's vocabulary.
   */
  private prepare(original: TrainingSequence): Prepared | "out_of_vocab" | undefined {
    const c = this.config
    let s = original
    let behaviourKnown: Uint8Array | undefined
    if (!c.tito) {
      if (!this.template)
        throw new Error("the TITO-off ablation needs Trainer.template to re-render trajectories")
      const r = retokenizedSequence(this.template, original)
      if (r.ids.length < 2) return undefined
      s = {
        ...original,
        ids: r.ids,
        lossMask: r.lossMask,
        logprobs: r.logprobs,
        routing: undefined,
      }
      behaviourKnown = r.behaviourKnown
    }
    if (s.ids.length < 2) return undefined
    const vocab = this.model.config.vocabSize
    for (const id of s.ids) if (id >= vocab) return "out_of_vocab"
    if (!Number.isFinite(s.reward)) return undefined
    const reward = trainedReward(s, c.rewardKind) * c.rewardScale
    const rows = trajectoryRows({
      ids: s.ids,
      lossMask: s.lossMask,
      logprobs: s.logprobs,
      reward,
    })
    let actionCount = 0
    for (let r = 0; r < rows.action.length; r++) {
      if (rows.action[r] !== 1) continue
      actionCount++
      // Re-tokenised tokens were never sampled: their behaviour log-prob is filled in later.
      const known = behaviourKnown === undefined || behaviourKnown[r + 1] === 1
      if (known && !Number.isFinite(rows.behaviourLogprobs[r] as number)) return undefined
      if (!known) rows.behaviourLogprobs[r] = Number.NaN
    }
    const weight = s.weight ?? 1
    if (!(Number.isFinite(weight) && weight >= 0)) return undefined
    const empty = new Float64Array(0)
    return {
      source: original,
      ids: s.ids,
      replay: c.replayRouting && s.routing ? s.routing : undefined,
      rows,
      actionCount,
      reward,
      weight,
      prox: empty,
      oldValues: empty,
      advantages: empty,
      returns: empty,
    }
  }

  /**
   * A step that changes no weights: counted (step + 1) and reported with its reason, so that a
   * job whose batch had nothing to train on goes on.
   */
  skipStep(
    reason: SkipReason,
    batch: ReadonlyArray<TrainingSequence> = [],
    extra: Partial<StepMetrics> = {},
  ): StepMetrics {
    const phase = this.phase
    const { lr, criticLr } = this.learningRates()
    this.step++
    const n = Math.max(1, batch.length)
    return {
      phase,
      sequences: batch.length,
      tokens: batch.reduce((a, b) => a + b.ids.length, 0),
      actionTokens: 0,
      loss: 0,
      policyLoss: 0,
      valueLoss: 0,
      entropy: 0,
      clipfrac: 0,
      tisClipfrac: 0,
      approxKl: 0,
      ratioMean: 1,
      ratioMin: 1,
      ratioMax: 1,
      valueClipfrac: 0,
      epochs: [],
      explainedVariance: 0,
      trainInferLogprobAbsDiff: 0,
      mismatchKlK3: 0,
      gradNorm: 0,
      optimizerSteps: 0,
      lr,
      criticLr,
      rewardMean: rewardMeanOf(batch),
      trainRewardMean:
        (batch.reduce(
          (a, b) => a + (Number.isFinite(b.reward) ? trainedReward(b, this.config.rewardKind) : 0),
          0,
        ) /
          n) *
        this.config.rewardScale,
      resolvedRate: batch.filter((b) => b.resolved).length / n,
      stalenessMean: batch.reduce((a, b) => a + Number(b.staleness), 0) / n,
      weightMean: 0,
      advantageMean: 0,
      advantageStd: 0,
      droppedZeroVariance: 0,
      droppedInvalid: 0,
      droppedOutOfVocab: 0,
      ungrouped: 0,
      seconds: 0,
      ...extra,
      trainedEpisodeIds: [],
      skipped: true,
      skipReason: reason,
    }
  }

  /**
   * One PPO update on `batch` (see the class comment); `lr` overrides the scheduled actor
   * learning rate. Sequences of one task's rollouts share a `groupId`.
   */
  ppoStep(batch: ReadonlyArray<TrainingSequence>, lr?: number): StepMetrics {
    const started = Date.now()
    const c = this.config
    const phase = this.phase
    const policyWeight = policyWeightFor(phase)
    const V = this.model.config.vocabSize
    const rates = this.learningRates()
    const actorLr = lr ?? rates.lr
    const criticLr = rates.criticLr
    const n = Math.max(1, batch.length)
    const base = {
      rewardMean: rewardMeanOf(batch),
      resolvedRate: batch.filter((b) => b.resolved).length / n,
      stalenessMean: batch.reduce((a, b) => a + Number(b.staleness), 0) / n,
    }
    const elapsed = () => (Date.now() - started) / 1000

    // 1. What can be trained on.
    let droppedInvalid = 0
    let droppedOutOfVocab = 0
    let prepared: Prepared[] = []
    for (const s of batch) {
      const p = this.prepare(s)
      if (p === "out_of_vocab") droppedOutOfVocab++
      if (p !== undefined && p !== "out_of_vocab") prepared.push(p)
      else droppedInvalid++
    }
    let droppedZeroVariance = 0
    if (dropsZeroVarianceGroups(c) && prepared.length > 0) {
      const zero = zeroVarianceMembers(
        prepared.map((p) => p.reward),
        prepared.map((p) => p.source.groupId),
      )
      const kept = prepared.filter((_, i) => zero[i] === 0)
      droppedZeroVariance = prepared.length - kept.length
      prepared = kept
    }
    const trainReward = prepared.reduce((a, p) => a + p.reward, 0) / Math.max(1, prepared.length)
    const skip = (reason: SkipReason) =>
      this.skipStep(reason, batch, {
        ...base,
        lr: actorLr,
        criticLr,
        trainRewardMean: trainReward,
        droppedZeroVariance,
        droppedInvalid,
        droppedOutOfVocab,
        seconds: elapsed(),
      })
    const actionTokens = prepared.reduce((a, p) => a + p.actionCount, 0)
    if (actionTokens === 0)
      return skip(
        droppedZeroVariance > 0 && prepared.length === 0
          ? "all_groups_filtered"
          : "no_trainable_tokens",
      )

    // 2. Proximal log-probs and old values, once, with the weights at the start of the update.
    const alignment: Array<{ learner: Float64Array; sampler: Float64Array; action: Uint8Array }> =
      []
    for (const p of prepared) {
      const scored = this.model.score(p.ids.subarray(0, p.ids.length - 1), {
        tape: false,
        ...(p.replay ? { replay: p.replay } : {}),
      })
      p.oldValues = Float64Array.from(scored.values)
      if (!finiteAll(scored.logits) || !finiteAll(p.oldValues)) return skip("non_finite")
      p.prox = temperedLogprobs(scored.logits, V, p.rows.targets, c.temperature)
      const behaviour = p.rows.behaviourLogprobs
      for (let r = 0; r < behaviour.length; r++)
        if (Number.isNaN(behaviour[r] as number)) behaviour[r] = p.prox[r] as number
      alignment.push({ learner: p.prox, sampler: behaviour, action: p.rows.action })
    }

    // 3. Advantages and returns.
    const adv = batchAdvantages(
      prepared.map((p) => ({
        rewards: p.rows.rewards,
        rewardRow: p.rows.rewardRow,
        action: p.rows.action,
        values: p.oldValues,
        reward: p.reward,
        groupId: p.source.groupId,
        weight: p.weight,
      })),
      {
        mode: c.advantageMode,
        gamma: c.gamma,
        actorLambda: c.actorLambda,
        criticLambda: c.criticLambda,
        normalize: c.normalizeAdvantages,
        center: centersAdvantages(c),
      },
    )
    prepared.forEach((p, i) => {
      p.advantages = adv.advantages[i] as Float64Array
      p.returns = adv.returns[i] as Float64Array
    })
    if (c.lossAggregation === "sequence") perSequenceWeights(prepared, actionTokens)

    // 4. Epochs of minibatch steps.
    const total = new Stats()
    const epochs: EpochMetrics[] = []
    let tisClipfrac = 0
    let tisTokens = 0
    let gradNormSum = 0
    for (let epoch = 0; epoch < Math.max(1, c.ppoEpochs); epoch++) {
      const stats = new Stats()
      const parts = minibatchOrder(
        prepared.length,
        Math.max(1, c.minibatches),
        mixSeed(c.seed, this.step, epoch),
      )
      for (const part of parts) {
        const mb = part.map((i) => prepared[i] as Prepared)
        const result = this.minibatchStep(mb, policyWeight, phase, actorLr, criticLr)
        if (result === undefined) {
          stats.skipped++
          continue
        }
        stats.add(result.stats)
        gradNormSum += result.gradNorm
        if (epoch === 0) {
          tisClipfrac += result.stats.tisClipfrac
          tisTokens += result.stats.tokens
        }
      }
      epochs.push(stats.epoch())
      total.add(stats)
    }
    if (total.steps === 0) return skip("non_finite")
    this.step++
    const all = total.epoch()
    const values: number[] = []
    const returns: number[] = []
    for (const p of prepared)
      for (let r = 0; r < p.oldValues.length; r++) {
        values.push(p.oldValues[r] as number)
        returns.push(p.returns[r] as number)
      }
    return {
      phase,
      sequences: batch.length,
      tokens: prepared.reduce((a, p) => a + p.ids.length, 0),
      actionTokens,
      loss: total.loss / total.steps,
      policyLoss: all.policyLoss,
      valueLoss: all.valueLoss,
      entropy: all.entropy,
      clipfrac: all.clipfrac,
      tisClipfrac: tisTokens === 0 ? 0 : tisClipfrac / tisTokens,
      approxKl: all.approxKl,
      ratioMean: all.ratioMean,
      ratioMin: all.ratioMin,
      ratioMax: all.ratioMax,
      valueClipfrac: all.valueClipfrac,
      epochs,
      explainedVariance: explainedVariance(values, returns),
      trainInferLogprobAbsDiff: trainInferLogprobAbsDiff(alignment),
      mismatchKlK3: mismatchKlK3(alignment),
      gradNorm: gradNormSum / total.steps,
      optimizerSteps: total.steps,
      lr: phase === "ppo" ? actorLr : 0,
      criticLr,
      ...base,
      trainRewardMean: trainReward,
      weightMean: prepared.reduce((a, p) => a + p.weight, 0) / prepared.length,
      advantageMean: adv.mean,
      advantageStd: adv.std,
      droppedZeroVariance,
      droppedInvalid,
      droppedOutOfVocab,
      ungrouped: c.advantageMode === "critic" ? 0 : adv.alone.reduce((a, b) => a + b, 0),
      trainedEpisodeIds: prepared.map((p) => p.source.episodeId),
      skipped: false,
      skipReason: "",
      seconds: elapsed(),
    }
  }

  /**
   * Loss and gradients of one minibatch (per-token means over its generated tokens, value loss
   * over its rows) and the optimiser step(s); undefined, with nothing changed, when the loss or
   * the gradients are not finite.
   */
  private minibatchStep(
    mb: ReadonlyArray<Prepared>,
    policyWeight: number,
    phase: TrainPhase,
    actorLr: number,
    criticLr: number,
  ): { stats: Stats; gradNorm: number } | undefined {
    const c = this.config
    const V = this.model.config.vocabSize
    const stats = new Stats()
    const normalizer = Math.max(
      1,
      mb.reduce((a, p) => a + p.actionCount, 0),
    )
    const valueNormalizer = Math.max(
      1,
      mb.reduce((a, p) => a + p.rows.targets.length, 0),
    )
    let grads: Params | undefined
    for (const p of mb) {
      const scored = this.model.score(
        p.ids.subarray(0, p.ids.length - 1),
        p.replay ? { replay: p.replay } : {},
      )
      const tape = scored.tape
      if (!tape) throw new Error("training forward kept no tape")
      // Non-finite logits or values from the current weights (or a proximal pass that had
      // them): this minibatch is left out. Checked here, where run time can produce them; a
      // PpoError from ppoLoss is a broken precondition (a bug), not an outcome.
      if (!allFinite(scored.logits, scored.values, p.prox, p.advantages, p.oldValues, p.returns))
        return undefined
      const loss = ppoLoss({
        logits: scored.logits,
        vocab: V,
        targets: p.rows.targets,
        action: p.rows.action,
        behaviourLogprobs: p.rows.behaviourLogprobs,
        proxLogprobs: p.prox,
        advantages: p.advantages,
        values: scored.values,
        oldValues: p.oldValues,
        returns: p.returns,
        clipLow: c.clipLow,
        clipHigh: c.clipHigh,
        ...(c.valueClip !== undefined ? { valueClip: c.valueClip } : {}),
        valueCoef: c.valueCoef,
        entropyCoef: c.entropyCoef,
        ...(c.tisThreshold !== undefined ? { tisThreshold: c.tisThreshold } : {}),
        temperature: c.temperature,
        normalizer,
        valueNormalizer,
        policyWeight,
      })
      if (!Number.isFinite(loss.loss)) return undefined
      const k = loss.actionRows
      stats.tokens += k
      stats.rows += loss.valueRows
      stats.policyLoss += loss.policyLoss * normalizer
      stats.valueLoss += loss.valueLoss * valueNormalizer
      stats.entropy += loss.entropy * k
      stats.clipfrac += loss.clipfrac * k
      stats.tisClipfrac += loss.tisClipfrac * k
      stats.approxKl += loss.approxKl * k
      stats.ratio += loss.ratioMean * k
      if (k > 0) {
        stats.ratioMin = Math.min(stats.ratioMin, loss.ratioMin)
        stats.ratioMax = Math.max(stats.ratioMax, loss.ratioMax)
      }
      stats.valueClipped += loss.valueClipfrac * loss.valueRows
      stats.valueRows += loss.valueRows
      stats.loss += loss.loss
      const g = this.model.backward(tape, loss.dLogits, loss.dValues, {
        auxLossCoef: c.auxLossCoef,
        valueToTrunk: sharedCritic(c),
      })
      if (grads) addGrads(this.model, grads, g)
      else grads = g
    }
    if (!grads) return undefined
    const entries = paramEntries(this.model.config, grads)
    const critic = entries.filter((e) => CRITIC_PARAMS.has(e.name))
    const actor = entries.filter((e) => !CRITIC_PARAMS.has(e.name))
    // A critic on the policy's trunk is clipped with it; a probe (group mode) on its own.
    const shared = sharedCritic(c)
    const norm = gradNormOf(phase !== "ppo" ? critic : shared ? entries : actor)
    if (!Number.isFinite(norm)) return undefined
    const clip = this.clipScale(norm)
    const criticClip = shared || phase !== "ppo" ? clip : this.clipScale(gradNormOf(critic))
    if (phase === "ppo")
      this.optimizer.step(new Map(actor.map((e) => [e.name, scaled(e.data, clip)])), actorLr)
    this.criticOptimizer.step(
      new Map(critic.map((e) => [e.name, scaled(e.data, criticClip)])),
      criticLr,
    )
    stats.steps = 1
    return { stats, gradNorm: norm }
  }
}

/**
 * Whether the critic shares the policy's trunk (its value loss reaches the trunk): in every mode
 * whose advantages use it. In `group` mode the critic is not used, so it is trained as a probe on
 * the trunk's features and its loss does not move the policy. (On the ladder at 3e-4 the two gave
 * the same train rewards, update by update, over 16 paired updates: the value head starts at zero
 * and its pull on the trunk stays small in a short run.)
 */
export const sharedCritic = (c: Pick<LearnerConfig, "advantageMode">): boolean =>
  c.advantageMode !== "group"

const scaled = (a: Floats, s: number): Floats => {
  if (s === 1) return a
  const out = new Float64Array(a.length)
  for (let i = 0; i < a.length; i++) out[i] = (a[i] as number) * s
  return out
}

/** The parameters the actor optimiser updates: every one but the value head. */
const actorParams = (model: TinyMoe) =>
  model
    .entries()
    .filter((e) => !CRITIC_PARAMS.has(e.name))
    .map((e) => ({ name: e.name, data: e.data, decay: e.decay }))

/** AdamW over the trunk and policy (every parameter but the value head); the trainer clips. */
export const actorOptimizer = (model: TinyMoe, config: LearnerConfig): AdamW =>
  new AdamW({ lr: config.lr, weightDecay: config.weightDecay }, actorParams(model))

/**
 * The actor optimiser of `model` continuing from `state` (another trainer's moments and step
 * count, e.g. a warm start's): the next step is the one the original optimiser would take.
 */
export const continuedActorOptimizer = (
  model: TinyMoe,
  config: LearnerConfig,
  state: AdamWState,
): AdamW =>
  AdamW.restore({ lr: config.lr, weightDecay: config.weightDecay }, actorParams(model), state)

/** AdamW over the value head at the critic's learning rate, without weight decay. */
export const criticOptimizerFor = (model: TinyMoe, config: LearnerConfig): AdamW =>
  new AdamW(
    { lr: config.criticLr, weightDecay: 0 },
    model
      .entries()
      .filter((e) => CRITIC_PARAMS.has(e.name))
      .map((e) => ({ name: e.name, data: e.data, decay: false })),
  )

/**
 * Sequence-level aggregation: scales each trajectory's advantages by the batch's mean generated
 * length over its own, so that under the per-token normaliser every trajectory's policy loss
 * weighs the same (the clipped objective is positively homogeneous in A).
 */
const perSequenceWeights = (
  prepared: ReadonlyArray<Pick<Prepared, "actionCount" | "advantages">>,
  actionTokens: number,
): void => {
  const meanLength = actionTokens / Math.max(1, prepared.length)
  for (const p of prepared) {
    if (p.actionCount === 0) continue
    const scale = meanLength / p.actionCount
    const a = p.advantages
    for (let r = 0; r < a.length; r++) a[r] = (a[r] as number) * scale
  }
}
