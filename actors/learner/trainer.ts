import {
  AdamW,
  addGrads,
  type ChatTemplate,
  optimizerFor,
  type Params,
  paramEntries,
  supervisedStep,
  type TinyMoe,
} from "../../model/index.ts"
import type { TrainingSequence } from "./decode.ts"
import {
  decoupledGae,
  explainedVariance,
  mismatchKlK3,
  policyWeightFor,
  ppoLoss,
  type TrainPhase,
  temperedLogprobs,
  trainInferLogprobAbsDiff,
  trainPhase,
  trajectoryRows,
} from "./ppo/index.ts"
import { retokenizedSequence } from "./retokenize.ts"

const CRITIC_PARAMS = new Set(["valueHead", "valueBias"])

export interface LearnerConfig {
  readonly lr: number
  readonly weightDecay: number
  readonly maxGradNorm: number
  readonly gamma: number
  /** Actor GAE λ; the critic uses λ = 1 (decoupled). */
  readonly actorLambda: number
  readonly clipLow: number
  readonly clipHigh: number
  readonly valueClip: number | undefined
  readonly valueCoef: number
  readonly entropyCoef: number
  /** Truncated importance sampling threshold C (token level); undefined disables TIS. */
  readonly tisThreshold: number | undefined
  /** The sampler's temperature: log-probs are compared and trained at it. */
  readonly temperature: number
  readonly rewardScale: number
  /** R3: replay the sampler's routing at every position. */
  readonly replayRouting: boolean
  /**
   * TITO: train on the sampled ids. Off (the ablation), each trajectory is re-rendered from its
   * text and re-tokenised (needs `Trainer.template`), and R3 cannot apply.
   */
  readonly tito: boolean
  readonly auxLossCoef: number
  readonly sftSteps: number
  readonly criticWarmupSteps: number
}

export const DEFAULT_LEARNER_CONFIG: LearnerConfig = {
  lr: 3e-4,
  weightDecay: 0.01,
  maxGradNorm: 1,
  gamma: 1,
  actorLambda: 0.95,
  clipLow: 0.2,
  clipHigh: 0.28,
  valueClip: 0.2,
  valueCoef: 0.5,
  entropyCoef: 0.001,
  tisThreshold: 2,
  temperature: 1,
  rewardScale: 1,
  replayRouting: true,
  tito: true,
  auxLossCoef: 0.01,
  sftSteps: 0,
  criticWarmupSteps: 0,
}

export interface StepMetrics {
  readonly phase: TrainPhase
  readonly sequences: number
  readonly tokens: number
  readonly actionTokens: number
  readonly loss: number
  readonly policyLoss: number
  readonly valueLoss: number
  readonly entropy: number
  readonly clipfrac: number
  readonly tisClipfrac: number
  readonly approxKl: number
  readonly explainedVariance: number
  readonly trainInferLogprobAbsDiff: number
  readonly mismatchKlK3: number
  readonly gradNorm: number
  readonly rewardMean: number
  readonly resolvedRate: number
  readonly stalenessMean: number
  readonly seconds: number
}

/**
 * One learner: the policy/critic, its optimiser and the update count. A PPO update scores each
 * sequence once with the current weights (replaying the sampler's routing when R3 is on), builds
 * advantages with decoupled GAE over every row (observations included), and takes one optimiser
 * step on the clipped policy loss (with truncated importance weights against the sampler's
 * log-probs), the clipped value loss and the entropy bonus.
 */
export class Trainer {
  readonly optimizer: AdamW
  /** Critic warm-up updates only the value head, so the frozen policy's rollouts stay on-policy. */
  readonly criticOptimizer: AdamW
  step = 0
  /** The chat template, for the TITO-off ablation (re-rendering from text). */
  template: ChatTemplate | undefined

  constructor(
    readonly model: TinyMoe,
    readonly config: LearnerConfig,
    optimizer?: AdamW,
    criticOptimizer?: AdamW,
  ) {
    this.optimizer =
      optimizer ??
      optimizerFor(model, {
        lr: config.lr,
        weightDecay: config.weightDecay,
        maxGradNorm: config.maxGradNorm,
      })
    this.criticOptimizer =
      criticOptimizer ??
      new AdamW(
        { lr: config.lr, weightDecay: 0, maxGradNorm: config.maxGradNorm },
        model
          .entries()
          .filter((e) => CRITIC_PARAMS.has(e.name))
          .map((e) => ({ name: e.name, data: e.data, decay: false })),
      )
  }

  /**
   * Supervised warm start on golden trajectories: next-token loss on the generated (loss mask 1)
   * tokens only, averaged over them, with the sampler's routing replayed when recorded.
   */
  sftStep(
    batch: ReadonlyArray<TrainingSequence>,
    lr?: number,
  ): { loss: number; gradNorm: number; tokens: number } {
    let total = 0
    for (const s of batch)
      for (let i = 1; i < s.lossMask.length; i++) total += s.lossMask[i] as number
    const scale = 1 / Math.max(1, total)
    const result = supervisedStep(
      this.model,
      this.optimizer,
      batch.map((s) => ({
        ids: s.ids,
        weights: Array.from(s.lossMask.subarray(1), (m) => m * scale),
        ...(this.config.replayRouting && s.routing ? { routing: s.routing } : {}),
      })),
      { auxLossCoef: this.config.auxLossCoef, ...(lr !== undefined ? { lr } : {}) },
    )
    this.step++
    return { loss: result.loss, gradNorm: result.gradNorm, tokens: total }
  }

  get phase(): TrainPhase {
    return trainPhase(this.step, {
      sftSteps: this.config.sftSteps,
      criticWarmupSteps: this.config.criticWarmupSteps,
    })
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

  ppoStep(batch: ReadonlyArray<TrainingSequence>, lr?: number): StepMetrics {
    const started = Date.now()
    const c = this.config
    const phase = this.phase === "sft" ? "ppo" : this.phase
    const policyWeight = policyWeightFor(phase)
    const V = this.model.config.vocabSize
    let actionTokens = 0
    for (const s of batch)
      for (let i = 1; i < s.lossMask.length; i++) actionTokens += s.lossMask[i] as number
    const normalizer = Math.max(1, actionTokens)
    const valueNormalizer = Math.max(
      1,
      batch.reduce((m, b) => m + b.ids.length - 1, 0),
    )
    let grads: Params | undefined
    const sums = {
      loss: 0,
      policyLoss: 0,
      valueLoss: 0,
      entropy: 0,
      clipfrac: 0,
      tisClipfrac: 0,
      approxKl: 0,
    }
    const alignment: Array<{ learner: Float64Array; sampler: Float64Array; action: Uint8Array }> =
      []
    const allValues: number[] = []
    const allReturns: number[] = []
    let tokens = 0
    for (const original of batch) {
      let s = original
      let behaviourKnown: Uint8Array | undefined
      if (!c.tito) {
        if (!this.template)
          throw new Error("the TITO-off ablation needs Trainer.template to re-render trajectories")
        const r = retokenizedSequence(this.template, original)
        if (r.ids.length < 2) continue
        s = {
          ...original,
          ids: r.ids,
          lossMask: r.lossMask,
          logprobs: r.logprobs,
          routing: undefined,
        }
        behaviourKnown = r.behaviourKnown
      }
      const n = s.ids.length
      tokens += n
      const rows = trajectoryRows({
        ids: s.ids,
        lossMask: s.lossMask,
        logprobs: s.logprobs,
        reward: s.reward,
        rewardScale: c.rewardScale,
      })
      const scored = this.model.score(
        s.ids.subarray(0, n - 1),
        c.replayRouting && s.routing ? { replay: s.routing } : {},
      )
      const tape = scored.tape
      if (!tape) throw new Error("training forward kept no tape")
      const values = Float64Array.from(scored.values)
      const { advantages, returns } = decoupledGae({
        rewards: rows.rewards,
        values,
        gamma: c.gamma,
        actorLambda: c.actorLambda,
      })
      const prox = temperedLogprobs(scored.logits, V, rows.targets, c.temperature)
      // Re-tokenised tokens were never sampled: their behaviour log-prob is the learner's own.
      if (behaviourKnown) {
        for (let r = 0; r < rows.action.length; r++) {
          if (rows.action[r] === 1 && behaviourKnown[r + 1] === 0)
            rows.behaviourLogprobs[r] = prox[r] as number
        }
      }
      const loss = ppoLoss({
        logits: scored.logits,
        vocab: V,
        targets: rows.targets,
        action: rows.action,
        behaviourLogprobs: rows.behaviourLogprobs,
        proxLogprobs: prox,
        advantages,
        values,
        oldValues: values,
        returns,
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
      const w = rows.action.reduce((a, b) => a + b, 0) / normalizer
      sums.loss += loss.loss
      sums.policyLoss += loss.policyLoss
      sums.valueLoss += loss.valueLoss
      sums.entropy += loss.entropy * w
      sums.clipfrac += loss.clipfrac * w
      sums.tisClipfrac += loss.tisClipfrac * w
      sums.approxKl += loss.approxKl * w
      alignment.push({ learner: prox, sampler: rows.behaviourLogprobs, action: rows.action })
      for (let r = 0; r < values.length; r++) {
        allValues.push(values[r] as number)
        allReturns.push(returns[r] as number)
      }
      const g = this.model.backward(tape, loss.dLogits, loss.dValues, {
        auxLossCoef: c.auxLossCoef,
      })
      if (grads) addGrads(this.model, grads, g)
      else grads = g
    }
    let gradNorm = 0
    if (grads) {
      const entries = paramEntries(this.model.config, grads)
      gradNorm =
        phase === "critic_warmup"
          ? this.criticOptimizer.step(
              new Map(
                entries.filter((e) => CRITIC_PARAMS.has(e.name)).map((e) => [e.name, e.data]),
              ),
              lr,
            )
          : this.optimizer.step(new Map(entries.map((e) => [e.name, e.data])), lr)
    }
    this.step++
    const n = Math.max(1, batch.length)
    return {
      phase,
      sequences: batch.length,
      tokens,
      actionTokens,
      ...sums,
      explainedVariance: explainedVariance(allValues, allReturns),
      trainInferLogprobAbsDiff: trainInferLogprobAbsDiff(alignment),
      mismatchKlK3: mismatchKlK3(alignment),
      gradNorm,
      rewardMean: batch.reduce((a, b) => a + b.reward, 0) / n,
      resolvedRate: batch.filter((b) => b.resolved).length / n,
      stalenessMean: batch.reduce((a, b) => a + Number(b.staleness), 0) / n,
      seconds: (Date.now() - started) / 1000,
    }
  }
}
