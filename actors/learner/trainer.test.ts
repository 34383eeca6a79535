import { describe, expect, it } from "vitest"
import { generateBatch, Rng, Sequence, TinyMoe } from "../../model/index.ts"
import type { TrainingSequence } from "./decode.ts"
import { DEFAULT_LEARNER_CONFIG, Trainer } from "./trainer.ts"

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

/** One-token episodes: reward 1 when the policy says GOOD. */
const rollouts = (model: TinyMoe, rng: Rng, n: number): TrainingSequence[] =>
  Array.from({ length: n }, () => {
    const sequence = new Sequence(model)
    sequence.append(PROMPT)
    const [g] = generateBatch(model, [
      { sequence, params: { temperature: 1, topP: 1, maxTokens: 1, stopTokenIds: new Set() }, rng },
    ])
    const token = g?.tokens[0] as number
    const reward = token === GOOD ? 1 : 0
    return {
      episodeId: "e",
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
    const trainer = new Trainer(model, { ...DEFAULT_LEARNER_CONFIG, lr: 3e-2, entropyCoef: 0 })
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
    const trainer = new Trainer(model, { ...DEFAULT_LEARNER_CONFIG, lr: 3e-2 })
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
