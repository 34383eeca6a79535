import { describe, expect, it } from "vitest"
import { generateBatch, Rng, Sequence, TinyMoe } from "../../model/index.ts"
import type { TrainingSequence } from "./decode.ts"
import { temperedLogprobs } from "./ppo/loss.ts"
import {
  centersAdvantages,
  DEFAULT_LEARNER_CONFIG,
  type LearnerConfig,
  Trainer,
} from "./trainer.ts"

const config = {
  vocabSize: 8,
  dModel: 16,
  nLayers: 1,
  nHeads: 2,
  nExperts: 4,
  topK: 2,
  dFf: 16,
  maxSeqLen: 16,
}
const PROMPT = [1, 2]
const GOOD = 5

/** One-token episodes: reward 1 when the policy says GOOD; groups of `k` consecutive ones. */
const rollouts = (model: TinyMoe, rng: Rng, n: number, k = 1): TrainingSequence[] =>
  Array.from({ length: n }, (_, i) => {
    const sequence = new Sequence(model)
    sequence.append(PROMPT)
    const [g] = generateBatch(model, [
      { sequence, params: { temperature: 1, topP: 1, maxTokens: 1, stopTokenIds: new Set() }, rng },
    ])
    const token = g?.tokens[0] as number
    const reward = token === GOOD ? 1 : 0
    return {
      episodeId: `e${i}`,
      groupId: `g${Math.floor(i / k)}`,
      ids: Uint32Array.from([...PROMPT, token]),
      lossMask: Uint8Array.from([0, 0, 1]),
      logprobs: Float32Array.from([0, 0, g?.logprobs[0] as number]),
      routing: sequence.routing(),
      reward,
      resolved: reward === 1,
      staleness: 0n,
    }
  })

const probabilityOfGood = (model: TinyMoe) => {
  const r = model.score(PROMPT, { tape: false })
  const row = Array.from(r.logits.subarray(8, 16))
  const max = Math.max(...row)
  const z = row.reduce((a, b) => a + Math.exp(b - max), 0)
  return Math.exp((row[GOOD] as number) - max) / z
}

describe("PPO trainer", () => {
  it("raises the probability of the rewarded action, with the sampler's log-probs matching the learner's", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const trainer = new Trainer(model, {
      ...DEFAULT_LEARNER_CONFIG,
      lr: 3e-2,
      entropyCoef: 0,
      criticWarmupSteps: 0,
    })
    const rng = new Rng(1)
    const before = probabilityOfGood(model)
    let first: number | undefined
    for (let i = 0; i < 25; i++) {
      const m = trainer.ppoStep(rollouts(model, rng, 16))
      first ??= m.trainInferLogprobAbsDiff
      expect(m.phase).toBe("ppo")
    }
    const after = probabilityOfGood(model)
    expect(before).toBeLessThan(0.3)
    expect(after).toBeGreaterThan(0.8)
    // Same weights, same kernels, routing replayed: the learner recomputes the sampler's numbers.
    expect(first).toBeLessThan(1e-5)
  })

  it("critic warm-up moves only the value head; the policy starts changing at the switch", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const trainer = new Trainer(model, {
      ...DEFAULT_LEARNER_CONFIG,
      lr: 1e-2,
      criticWarmupSteps: 2,
    })
    const snapshot = () =>
      model.entries().map((e) => ({ name: e.name, data: Float64Array.from(e.data) }))
    const changed = (a: ReturnType<typeof snapshot>, b: ReturnType<typeof snapshot>) =>
      a.filter((e, i) => e.data.some((v, j) => v !== (b[i]?.data[j] as number))).map((e) => e.name)
    const rng = new Rng(2)
    const s0 = snapshot()
    expect(trainer.phase).toBe("critic_warmup")
    trainer.ppoStep(rollouts(model, rng, 8))
    trainer.ppoStep(rollouts(model, rng, 8))
    const s2 = snapshot()
    expect(changed(s0, s2).sort()).toEqual(["valueBias", "valueHead"])
    expect(trainer.phase).toBe("ppo")
    trainer.ppoStep(rollouts(model, rng, 8))
    expect(changed(s2, snapshot())).toContain("layers.0.wq")
  })

  it("SFT on golden sequences raises their likelihood", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const trainer = new Trainer(model, { ...DEFAULT_LEARNER_CONFIG, sftLr: 3e-2 })
    const golden: TrainingSequence = {
      episodeId: "g",
      ids: Uint32Array.from([1, 2, GOOD, 3]),
      lossMask: Uint8Array.from([0, 0, 1, 1]),
      logprobs: new Float32Array(4),
      routing: undefined,
      reward: 1,
      resolved: true,
      staleness: 0n,
    }
    const first = trainer.sftStep([golden]).loss
    let last = first
    for (let i = 0; i < 30; i++) last = trainer.sftStep([golden]).loss
    expect(first).toBeGreaterThan(1.5)
    expect(last).toBeLessThan(0.1)
  })
})

describe("TITO switch", () => {
  it("off: trains on the conversation re-tokenised from text, the sampler's log-probs kept only where the ids survived", async () => {
    const { loadBundledTokenizer } = await import("../../model/bundled/bundled.ts")
    const { ChatTemplate } = await import("../../model/index.ts")
    const { retokenizedSequence } = await import("./retokenize.ts")
    const tokenizer = loadBundledTokenizer()
    const template = new ChatTemplate(tokenizer)
    const prompt = template.render(
      [
        { role: "system", content: "act" },
        { role: "user", content: "list files" },
      ],
      { addGenerationPrompt: true },
    ).ids
    // "ls" sampled as two byte tokens, a non-canonical split that re-tokenisation merges.
    const sampled = [
      ...tokenizer.encode("`"),
      ...tokenizer.encodeBytes(new TextEncoder().encode("l")),
      ...tokenizer.encodeBytes(new TextEncoder().encode("s")),
      template.endOfTurn[0] as number,
    ]
    const ids = Uint32Array.from([...prompt, ...sampled])
    const lossMask = Uint8Array.from([...prompt].map(() => 0).concat(sampled.map(() => 1)))
    const logprobs = Float32Array.from([...prompt].map(() => 0).concat(sampled.map(() => -1)))
    const r = retokenizedSequence(template, { ids, lossMask, logprobs })
    expect(r.ids.length).toBeLessThanOrEqual(ids.length)
    expect(
      [...r.behaviourKnown].filter((k, i) => k === 1 && r.lossMask[i] === 1).length,
    ).toBeGreaterThan(0)
    const model = TinyMoe.create({
      config: { ...config, vocabSize: tokenizer.vocabSize, maxSeqLen: 64 },
      seed: 1,
    })
    const trainer = new Trainer(model, { ...DEFAULT_LEARNER_CONFIG, tito: false })
    trainer.template = template
    const m = trainer.ppoStep([
      {
        episodeId: "x",
        ids,
        lossMask,
        logprobs,
        routing: undefined,
        reward: 1,
        resolved: true,
        staleness: 0n,
      },
    ])
    expect(Number.isFinite(m.loss)).toBe(true)
    expect(m.tokens).toBe(r.ids.length)
  })
})

type Snapshot = Array<{ name: string; data: Float64Array }>
const snapshot = (model: TinyMoe): Snapshot =>
  model.entries().map((e) => ({ name: e.name, data: Float64Array.from(e.data) }))
/** Names of the parameters that differ (NaN equals NaN). */
const changed = (a: Snapshot, b: Snapshot): string[] =>
  a
    .filter((e, i) => e.data.some((v, j) => !Object.is(v, b[i]?.data[j] as number)))
    .map((e) => e.name)
    .sort()

/** A one-token episode saying `token`, with the learner's own log-prob as the sampler's. */
const episode = (
  trainer: Trainer,
  token: number,
  patch: Partial<TrainingSequence> = {},
): TrainingSequence => {
  const s: TrainingSequence = {
    episodeId: `t${token}`,
    ids: Uint32Array.from([...PROMPT, token]),
    lossMask: Uint8Array.from([0, 0, 1]),
    logprobs: new Float32Array(3),
    routing: undefined,
    reward: 0,
    resolved: false,
    staleness: 0n,
    ...patch,
  }
  const lp = trainer.score(s)
  return { ...s, logprobs: Float32Array.from([0, 0, lp[1] as number]) }
}

const ppoConfig = { ...DEFAULT_LEARNER_CONFIG, criticWarmupSteps: 0 }

describe("PPO update", () => {
  it("scores the proximal policy once: epoch 1 is on-policy, later epochs clip the ratio and the values", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const trainer = new Trainer(model, {
      ...ppoConfig,
      lr: 5e-2,
      criticLr: 2e-1,
      ppoEpochs: 3,
      minibatches: 1,
      entropyCoef: 0,
    })
    const batch = rollouts(model, new Rng(3), 16)
    expect(new Set(batch.map((b) => b.reward)).size).toBe(2)
    const m = trainer.ppoStep(batch)
    expect(m.skipped).toBe(false)
    expect(m.epochs).toHaveLength(3)
    expect(m.optimizerSteps).toBe(3)
    const [first, second, third] = m.epochs
    // One minibatch: the first step sees the weights the proximal log-probs came from.
    expect(first?.clipfrac).toBe(0)
    expect(first?.approxKl).toBeCloseTo(0, 12)
    expect(first?.ratioMin).toBeCloseTo(1, 9)
    expect(first?.ratioMax).toBeCloseTo(1, 9)
    expect(first?.valueClipfrac).toBe(0)
    // The policy moved: ratios leave the clip range, the KL to π_prox grows.
    expect(third?.clipfrac).toBeGreaterThan(0)
    expect(third?.approxKl).toBeGreaterThan(first?.approxKl ?? 0)
    expect(
      (third?.ratioMax ?? 1) > 1 + ppoConfig.clipHigh || (third?.ratioMin ?? 1) < 1 - 0.2,
    ).toBe(true)
    // The critic moved more than value_clip from the old values.
    expect(Math.max(second?.valueClipfrac ?? 0, third?.valueClipfrac ?? 0)).toBeGreaterThan(0)
    // The batch figures are the means over the three steps.
    expect(m.clipfrac).toBeGreaterThan(0)
    expect(m.clipfrac).toBeLessThan(third?.clipfrac ?? 0)
  })

  it("takes ppo_epochs × minibatches optimiser steps on seeded shuffles (at most one per sequence)", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const trainer = new Trainer(model, { ...ppoConfig, ppoEpochs: 2, minibatches: 4 })
    const batch = rollouts(model, new Rng(5), 8)
    const m = trainer.ppoStep(batch)
    expect(m.optimizerSteps).toBe(8)
    expect(trainer.optimizer.stepCount).toBe(8)
    expect(trainer.criticOptimizer.stepCount).toBe(8)
    expect(trainer.ppoStep(batch.slice(0, 3)).optimizerSteps).toBe(6)

    // The same seed gives the same weights; another seed shuffles differently.
    const run = (seed: number) => {
      const mm = TinyMoe.create({ config, seed: 4 })
      new Trainer(mm, { ...ppoConfig, ppoEpochs: 2, minibatches: 2, seed }).ppoStep(batch)
      return snapshot(mm)
    }
    expect(changed(run(1), run(1))).toEqual([])
    expect(changed(run(1), run(2)).length).toBeGreaterThan(0)
  })

  it("steps the actor at lr and the value head at critic_lr", () => {
    const batch = rollouts(TinyMoe.create({ config, seed: 4 }), new Rng(6), 8)
    const moved = (lr: number, criticLr: number) => {
      const model = TinyMoe.create({ config, seed: 4 })
      const before = snapshot(model)
      new Trainer(model, { ...ppoConfig, lr, criticLr }).ppoStep(batch)
      return changed(before, snapshot(model))
    }
    expect(moved(0, 1e-2)).toEqual(["valueBias", "valueHead"])
    const actorOnly = moved(1e-2, 0)
    expect(actorOnly).not.toContain("valueHead")
    expect(actorOnly).not.toContain("valueBias")
    expect(actorOnly).toContain("layers.0.wq")
  })

  it("r3 on: the learner's forward replays the recorded routing; off: it routes itself", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const [sampled] = rollouts(model, new Rng(3), 1)
    if (sampled?.routing === undefined) throw new Error("no routing recorded")
    // A recorded routing the learner would not choose: each row's other two experts of four.
    const forged = Uint8Array.from(sampled.routing)
    for (let r = 0; r < forged.length; r += 2) {
      const others = [0, 1, 2, 3].filter((e) => e !== forged[r] && e !== forged[r + 1])
      forged[r] = others[0] as number
      forged[r + 1] = others[1] as number
    }
    const seq = { ...sampled, routing: forged }
    const ids = seq.ids.subarray(0, seq.ids.length - 1)
    const logprobs = (replay?: Uint8Array) =>
      Array.from(
        temperedLogprobs(
          model.score(ids, { tape: false, ...(replay ? { replay } : {}) }).logits,
          config.vocabSize,
          seq.ids.subarray(1),
        ),
      )
    const on = Array.from(new Trainer(model, { ...ppoConfig, replayRouting: true }).score(seq))
    const off = Array.from(new Trainer(model, { ...ppoConfig, replayRouting: false }).score(seq))
    expect(on).toEqual(logprobs(forged))
    expect(off).toEqual(logprobs())
    expect(on).not.toEqual(off)
  })

  it("clips the gradient to max_grad_norm before the optimiser step (0: no clipping)", () => {
    const batch = rollouts(TinyMoe.create({ config, seed: 4 }), new Rng(6), 8)
    /** The largest change of any query-projection weight after one update. */
    const moved = (maxGradNorm: number) => {
      const model = TinyMoe.create({ config, seed: 4 })
      const before = Float64Array.from(
        model.entries().find((e) => e.name === "layers.0.wq")?.data ?? [],
      )
      new Trainer(model, { ...ppoConfig, maxGradNorm, ppoEpochs: 1, minibatches: 1 }).ppoStep(batch)
      const after = model.entries().find((e) => e.name === "layers.0.wq")?.data ?? []
      return before.reduce((m, v, i) => Math.max(m, Math.abs((after[i] as number) - v)), 0)
    }
    // AdamW divides by the gradient's own scale, so a clip only shows where the clipped gradient
    // falls under its ε: clipped to 1e-12, the step is a small fraction of the unclipped one.
    const free = moved(0)
    expect(free).toBeGreaterThan(0)
    expect(moved(1e-12)).toBeLessThan(free * 0.05)
    expect(moved(1e6)).toBe(free)
  })

  it("group mode trains the critic as a probe: its value loss never moves the policy's trunk", () => {
    const batch = rollouts(TinyMoe.create({ config, seed: 4 }), new Rng(6), 8)
    const trained = (advantageMode: "group" | "critic", valueCoef: number) => {
      const model = TinyMoe.create({ config, seed: 4 })
      // Two updates: the first moves the zero-initialised value head, the second would carry
      // the value loss through it into the trunk.
      const trainer = new Trainer(model, { ...ppoConfig, advantageMode, valueCoef, criticLr: 1e-1 })
      trainer.ppoStep(batch)
      trainer.ppoStep(batch)
      return snapshot(model)
    }
    const actorOf = (s: Snapshot) => s.filter((e) => !e.name.startsWith("value"))
    expect(changed(actorOf(trained("group", 0.5)), actorOf(trained("group", 0)))).toEqual([])
    expect(changed(trained("group", 0.5), trained("group", 0))).toEqual(["valueBias", "valueHead"])
    // A critic whose advantages the policy uses shares the trunk: its loss reaches it.
    expect(changed(actorOf(trained("critic", 0.5)), actorOf(trained("critic", 0)))).toContain(
      "layers.0.wq",
    )
  })

  it("trains the critic on critic_lambda returns (hand-checked value loss)", () => {
    const valueLoss = (criticLambda: number) => {
      const model = TinyMoe.create({ config, seed: 4 })
      const trainer = new Trainer(model, {
        ...ppoConfig,
        criticLambda,
        ppoEpochs: 1,
        minibatches: 1,
        valueClip: undefined,
      })
      const batch = [episode(trainer, GOOD, { reward: 1 }), episode(trainer, 3, { reward: 0 })]
      // Rows: 0 (after the prompt's first token) and 1 (the generated token, reward R).
      // λ = 1: G = [R, R]; λ = 0: G = [V_1, R]. Value loss ½ · Σ (V − G)² / rows.
      let expected = 0
      for (const s of batch) {
        const v = Array.from(model.score(s.ids.subarray(0, 2), { tape: false }).values)
        const [v0 = 0, v1 = 0] = v
        const g0 = criticLambda === 1 ? s.reward : v1
        expected += 0.5 * ((v0 - g0) ** 2 + (v1 - s.reward) ** 2)
      }
      const m = trainer.ppoStep(batch)
      return { actual: m.epochs[0]?.valueLoss ?? Number.NaN, expected: expected / 4 }
    }
    const mc = valueLoss(1)
    const td = valueLoss(0)
    expect(mc.actual).toBeCloseTo(mc.expected, 10)
    expect(td.actual).toBeCloseTo(td.expected, 10)
    expect(td.actual).not.toBeCloseTo(mc.actual, 6)
  })

  it("group baseline and staleness weights: the policy loss of a hand-built batch", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const trainer = new Trainer(model, {
      ...ppoConfig,
      advantageMode: "group",
      normalizeAdvantages: false,
      ppoEpochs: 1,
      minibatches: 1,
      entropyCoef: 0,
    })
    // Group g: rewards 1 and 0 → centred 1 and −1; the second is half as fresh (weight ½).
    // Ratio 1 and TIS weight 1 (the sampler's log-probs are the learner's): policy loss
    // = −(1 · 1 + ½ · (−1)) / 2 tokens = −0.25. Group h: equal rewards, dropped.
    const m = trainer.ppoStep([
      episode(trainer, GOOD, { reward: 1, groupId: "g" }),
      episode(trainer, 3, { reward: 0, groupId: "g", weight: 0.5 }),
      episode(trainer, 4, { reward: 0, groupId: "h" }),
      episode(trainer, 6, { reward: 0, groupId: "h" }),
    ])
    expect(m.droppedZeroVariance).toBe(2)
    expect(m.actionTokens).toBe(2)
    expect(m.policyLoss).toBeCloseTo(-0.25, 5)
    expect(m.weightMean).toBe(0.75)
    expect(m.advantageMean).toBe(0)
    expect(m.advantageStd).toBe(1)
    expect(m.trainedEpisodeIds).toEqual([`t${GOOD}`, "t3"])
    // Weight 0: no policy loss at all.
    const none = new Trainer(TinyMoe.create({ config, seed: 4 }), trainer.config).ppoStep([
      episode(trainer, GOOD, { reward: 1, groupId: "g", weight: 0 }),
      episode(trainer, 3, { reward: 0, groupId: "g", weight: 0 }),
    ])
    expect(none.policyLoss).toBe(0)
  })

  it("whitening re-centres only in critic mode by default: a group's long failure keeps its push, unless the loss weighs sequences alike", () => {
    const failure = (t: Trainer): TrainingSequence => {
      const s: TrainingSequence = {
        episodeId: "long",
        groupId: "g",
        ids: Uint32Array.from([...PROMPT, 3, 4, 6]),
        lossMask: Uint8Array.from([0, 0, 1, 1, 1]),
        logprobs: new Float32Array(5),
        routing: undefined,
        reward: 0,
        resolved: false,
        staleness: 0n,
      }
      const lp = t.score(s)
      return { ...s, logprobs: Float32Array.from([0, 0, ...Array.from(lp).slice(1, 4)]) }
    }
    const run = (
      centerAdvantages: boolean | undefined,
      lossAggregation: LearnerConfig["lossAggregation"] = "token",
    ) => {
      const t = new Trainer(TinyMoe.create({ config, seed: 4 }), {
        ...ppoConfig,
        advantageMode: "group",
        centerAdvantages,
        lossAggregation,
        ppoEpochs: 1,
        minibatches: 1,
        entropyCoef: 0,
      })
      return t.ppoStep([episode(t, GOOD, { reward: 1, groupId: "g" }), failure(t)]).policyLoss
    }
    // RLOO: +1 on the success's token, −1 on the failure's three; std over the 4 tokens √0.75.
    // Ratio 1: policy loss = −Σ A / 4. Centred: Σ A = 0. Scaled only: −(1 − 3)/√0.75/4.
    const scaled = 2 / Math.sqrt(0.75) / 4
    expect(run(undefined)).toBeCloseTo(scaled, 5)
    expect(run(false)).toBeCloseTo(scaled, 5)
    expect(run(true)).toBeCloseTo(0, 5)
    // Sequence aggregation: mean length 2, so the success's token gets ×2 and the failure's three
    // ×⅔; each episode then pushes as hard as the other and the summed advantage is 0.
    expect(run(false, "sequence")).toBeCloseTo(0, 5)
    expect(run(false, "sequence")).not.toBeCloseTo(run(false, "token"), 3)
    expect(centersAdvantages({ ...ppoConfig, advantageMode: "critic" })).toBe(true)
    expect(centersAdvantages({ ...ppoConfig, advantageMode: "group+critic" })).toBe(false)
  })

  it("keeps zero-variance groups when the filter is off, and never drops in critic mode by default", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const same = (t: Trainer) => [
      episode(t, 4, { reward: 0, groupId: "h" }),
      episode(t, 6, { reward: 0, groupId: "h" }),
    ]
    const off = new Trainer(model, {
      ...ppoConfig,
      advantageMode: "group",
      dropZeroVarianceGroups: false,
    })
    const m = off.ppoStep(same(off))
    expect(m.skipped).toBe(false)
    expect(m.droppedZeroVariance).toBe(0)
    const critic = new Trainer(model, ppoConfig)
    expect(critic.ppoStep(same(critic)).droppedZeroVariance).toBe(0)
  })

  it("trains on passing tests over the task's tests, and reports the raw count", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const trainer = new Trainer(model, { ...ppoConfig, ppoEpochs: 1, minibatches: 1 })
    const m = trainer.ppoStep([
      episode(trainer, GOOD, { reward: 3, testsTotal: 4 }),
      episode(trainer, 3, { reward: 1, testsTotal: 4 }),
    ])
    expect(m.rewardMean).toBe(2)
    expect(m.trainRewardMean).toBe(0.5)
  })

  it("binary reward: 1 for a resolved episode, 0 otherwise, so partial progress earns nothing", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const batch = (t: Trainer) => [
      episode(t, GOOD, { reward: 4, testsTotal: 4, resolved: true, groupId: "g" }),
      episode(t, 3, { reward: 3, testsTotal: 4, groupId: "g" }),
      episode(t, 6, { reward: 3, testsTotal: 4, groupId: "h" }),
      episode(t, 4, { reward: 1, testsTotal: 4, groupId: "h" }),
    ]
    const group = { ...ppoConfig, advantageMode: "group" as const, ppoEpochs: 1, minibatches: 1 }
    const dense = new Trainer(model, group)
    const d = dense.ppoStep(batch(dense))
    expect(d.trainRewardMean).toBe((1 + 0.75 + 0.75 + 0.25) / 4)
    expect(d.droppedZeroVariance).toBe(0)
    const binary = new Trainer(TinyMoe.create({ config, seed: 4 }), {
      ...group,
      rewardKind: "binary",
    })
    const b = binary.ppoStep(batch(binary))
    // Group h is 0 and 0 under the binary reward: no signal, dropped by the group filter; the
    // mean is over what was trained on (group g: 1 and 0).
    expect(b.droppedZeroVariance).toBe(2)
    expect(b.trainRewardMean).toBe(0.5)
    expect(b.rewardMean).toBe(d.rewardMean)
  })

  it("follows the learning-rate schedule over PPO updates (critic warm-up at the base critic lr)", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const trainer = new Trainer(model, {
      ...DEFAULT_LEARNER_CONFIG,
      criticWarmupSteps: 1,
      lr: 1e-3,
      criticLr: 2e-3,
      lrSchedule: "cosine",
      lrWarmupSteps: 2,
      lrDecaySteps: 4,
      minLrRatio: 0.1,
      ppoEpochs: 1,
      minibatches: 1,
    })
    const batch = rollouts(model, new Rng(7), 4)
    const rates = Array.from({ length: 6 }, () => {
      const m = trainer.ppoStep(batch)
      return [m.lr, m.criticLr]
    })
    // Warm-up (critic only), then PPO updates u = 0..4: ½, 1, 1, cos(π/2) → 0.55, 0.1.
    const f = [0.5, 1, 1, 0.55, 0.1]
    expect(rates[0]).toEqual([0, 2e-3])
    f.forEach((x, u) => {
      expect(rates[u + 1]?.[0]).toBeCloseTo(1e-3 * x, 12)
      expect(rates[u + 1]?.[1]).toBeCloseTo(2e-3 * x, 12)
    })
  })

  it("SFT steps the actor at sft_lr, leaves the critic alone and does not count as an RL step", () => {
    const golden = (t: Trainer) => [episode(t, GOOD, { reward: 1 })]
    const model = TinyMoe.create({ config, seed: 4 })
    const before = snapshot(model)
    const trainer = new Trainer(model, { ...DEFAULT_LEARNER_CONFIG, sftLr: 0 })
    trainer.sftStep(golden(trainer))
    expect(changed(before, snapshot(model))).toEqual([])
    const moving = new Trainer(model, { ...DEFAULT_LEARNER_CONFIG, sftLr: 1e-2 })
    moving.sftStep(golden(moving))
    const moved = changed(before, snapshot(model))
    expect(moved).toContain("layers.0.wq")
    expect(moved).not.toContain("valueHead")
    expect(moving.step).toBe(0)
    expect(moving.sftStepsDone).toBe(1)
    expect(moving.phase).toBe("critic_warmup")
  })
})

describe("PPO update on bad input", () => {
  it("skips a batch with nothing generated, counting the step", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const trainer = new Trainer(model, ppoConfig)
    const before = snapshot(model)
    const empty = trainer.ppoStep([])
    expect(empty).toMatchObject({ skipped: true, skipReason: "no_trainable_tokens" })
    const prompt = trainer.ppoStep([
      { ...episode(trainer, 3), lossMask: Uint8Array.from([0, 0, 0]) },
    ])
    expect(prompt).toMatchObject({ skipped: true, skipReason: "no_trainable_tokens" })
    expect(trainer.step).toBe(2)
    expect(changed(before, snapshot(model))).toEqual([])
  })

  it("skips a batch whose every group has equal rewards under a group baseline", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const trainer = new Trainer(model, { ...ppoConfig, advantageMode: "group+critic" })
    const before = snapshot(model)
    const m = trainer.ppoStep([
      episode(trainer, 3, { reward: 1, groupId: "a" }),
      episode(trainer, 4, { reward: 1, groupId: "a" }),
      episode(trainer, 5, { reward: 0, groupId: "b" }),
      episode(trainer, 6, { reward: 0, groupId: "b" }),
    ])
    expect(m).toMatchObject({
      skipped: true,
      skipReason: "all_groups_filtered",
      droppedZeroVariance: 4,
      trainedEpisodeIds: [],
    })
    expect(trainer.step).toBe(1)
    expect(changed(before, snapshot(model))).toEqual([])
  })

  it("skips a batch whose loss is not finite, changing nothing", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const trainer = new Trainer(model, ppoConfig)
    const batch = [episode(trainer, GOOD, { reward: 1 }), episode(trainer, 3)]
    const bias = model.entries().find((e) => e.name === "valueBias")
    if (!bias) throw new Error("no valueBias")
    bias.data[0] = Number.NaN
    const before = snapshot(model)
    const m = trainer.ppoStep(batch)
    expect(m).toMatchObject({ skipped: true, skipReason: "non_finite", optimizerSteps: 0 })
    expect(changed(before, snapshot(model))).toEqual([])
    expect(trainer.optimizer.stepCount).toBe(0)
    expect(trainer.step).toBe(1)
  })

  it("drops a trajectory with a non-finite sampler log-prob and trains on the rest", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const trainer = new Trainer(model, ppoConfig)
    const bad = episode(trainer, 3)
    const m = trainer.ppoStep([
      episode(trainer, GOOD, { reward: 1 }),
      { ...bad, logprobs: Float32Array.from([0, 0, Number.NaN]) },
    ])
    expect(m).toMatchObject({ skipped: false, droppedInvalid: 1, actionTokens: 1 })
    // A token outside the vocabulary, or a reward that is not a number: dropped the same way.
    const worse = trainer.ppoStep([
      episode(trainer, GOOD, { reward: 1 }),
      { ...bad, ids: Uint32Array.from([...PROMPT, config.vocabSize]) },
      { ...bad, reward: Number.NaN },
    ])
    expect(worse).toMatchObject({
      skipped: false,
      droppedInvalid: 2,
      droppedOutOfVocab: 1,
      actionTokens: 1,
    })
  })
})
