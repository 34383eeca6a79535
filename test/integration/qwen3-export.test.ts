/**
 * Issue 39, must show: a trained TinyMoE, exported as a Hugging Face checkpoint directory, is the
 * model t1's sampler ran. A few supervised steps move it off its initialisation; the export
 * (shards, index, config.json; the critic beside them) is loaded by a Qwen3-MoE forward written
 * in PyTorch from transformers' modeling_qwen3_moe.py (clients/python/t1_trainer/qwen3_moe.py),
 * by tensor name only, and scores the episodes the TypeScript sampler generated with it. With the
 * sampler's routing replayed the two agree to float32 rounding (mean |Δ log p| under 1e-4); the
 * figure without replay is printed beside it.
 */
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import {
  bf16Round,
  encodeWeights,
  hfCheckpointFiles,
  optimizerFor,
  readHfCheckpoint,
  type SupervisedSequence,
  supervisedStep,
  TinyMoe,
} from "../../model/index.ts"
import { selectKernels } from "../../model/kernels/select.ts"
import { torchPython } from "../support/python.ts"
import { sampleEpisodes } from "../support/sampled-episodes.ts"

const ALIGNMENT = fileURLToPath(new URL("../../clients/python/tests/alignment.py", import.meta.url))
const RESAVE = fileURLToPath(new URL("../../clients/python/tests/resave.py", import.meta.url))

interface Alignment {
  readonly replay: number
  readonly no_replay: number
  readonly replay_max_episode: number
  readonly routing_differs: number
  readonly routing_choices: number
  readonly tokens: number
  readonly episodes: number
}

/** Strided runs through the vocabulary: something to learn in a few steps. */
const corpus = (step: number, vocab: number): SupervisedSequence[] =>
  Array.from({ length: 4 }, (_, i) => {
    const stride = 1 + ((step + i) % 3)
    const start = (step * 17 + i * 29) % vocab
    const ids = Array.from({ length: 40 }, (_, j) => (start + j * stride) % vocab)
    return { ids, weights: new Array<number>(ids.length - 1).fill(1) }
  })

describe.skipIf(torchPython === undefined)(
  "exported TinyMoE in a PyTorch Qwen3-MoE (HF names only) = t1's sampler",
  () => {
    it("reproduces the sampler's log-probs on sampled episodes with routing replay (mean |Δ| < 1e-4)", async () => {
      const model = TinyMoe.create({
        config: { vocabSize: 300, nHeads: 4, nKvHeads: 2, maxSeqLen: 512 },
        seed: 21,
      })
      const before = model.score(corpus(0, 300)[0]?.ids ?? [], { tape: false }).logits.slice()
      const optimizer = optimizerFor(model, { lr: 3e-3 })
      const losses = Array.from(
        { length: 6 },
        (_, step) =>
          supervisedStep(model, optimizer, corpus(step, 300), { auxLossCoef: 0.01, threads: 1 })
            .loss,
      )
      const after = model.score(corpus(0, 300)[0]?.ids ?? [], { tape: false }).logits
      let moved = 0
      for (let i = 0; i < after.length; i++)
        moved = Math.max(moved, Math.abs((after[i] as number) - (before[i] as number)))
      expect(moved).toBeGreaterThan(1e-2)

      const dir = mkdtempSync(join(tmpdir(), "t1-qwen3-export-"))
      const checkpoint = join(dir, "checkpoint")
      const files = hfCheckpointFiles(encodeWeights(model, "F32", { version: 6n }), {
        maxShardBytes: 400_000,
      })
      for (const f of files) {
        mkdirSync(dirname(join(checkpoint, f.name)), { recursive: true })
        writeFileSync(join(checkpoint, f.name), f.bytes)
      }
      expect(files.filter((f) => f.name.startsWith("model-")).length).toBeGreaterThan(1)

      // As t1's samplers run the published weights: f32, the fastest kernels this machine has.
      const sampled = await sampleEpisodes(model.withKernels(selectKernels("auto")), {
        episodes: 8,
        promptTokens: 24,
        maxTokens: 96,
      })
      const sequences = sampled.map((e) => ({
        ids: e.ids,
        mask: e.ids.map((_, j) => (j < e.prompt ? 0 : 1)),
        logprobs: e.ids.map((_, j) => (j < e.prompt ? 0 : (e.logprobs[j - e.prompt] ?? 0))),
        routing: e.routing,
        temperature: 1,
      }))
      writeFileSync(join(dir, "sequences.json"), JSON.stringify(sequences))
      const run = spawnSync(torchPython as string, [ALIGNMENT, dir, checkpoint], {
        encoding: "utf8",
      })
      expect(run.stderr).toBe("")
      expect(run.status).toBe(0)
      const a = JSON.parse(readFileSync(join(dir, "alignment.json"), "utf8")) as Alignment
      console.log(
        `qwen3 export: ${losses.length} supervised steps (loss ${losses[0]?.toFixed(3)} → ${losses.at(-1)?.toFixed(3)}), ${files.length} files; PyTorch Qwen3-MoE vs t1 sampler over ${a.episodes} episodes, ${a.tokens} generated tokens: mean |Δ log p| ${a.replay.toExponential(2)} with routing replay (worst episode ${a.replay_max_episode.toExponential(2)}), ${a.no_replay.toExponential(2)} without (${a.routing_differs} of ${a.routing_choices} routing choices differ)`,
      )
      expect(a.episodes).toBe(8)
      expect(a.tokens).toBeGreaterThan(8 * 32)
      expect(a.replay).toBeLessThan(1e-4)
      expect(a.no_replay).toBeGreaterThanOrEqual(a.replay)
      rmSync(dir, { recursive: true, force: true })
    }, 180_000)

    it("a directory the PyTorch side writes (f32 and bf16 shards, the critic beside them) is read back by t1 by name, tensor for tensor", () => {
      const model = TinyMoe.create({
        config: { vocabSize: 300, nHeads: 4, nKvHeads: 2, maxSeqLen: 512 },
        seed: 22,
      })
      // A critic that is not zero, so its trip is checked too.
      model.params.valueHead.forEach((_, i, a) => {
        a[i] = Math.sin(i) / 10
      })
      model.params.valueBias[0] = 0.25
      const dir = mkdtempSync(join(tmpdir(), "t1-qwen3-resave-"))
      for (const f of hfCheckpointFiles(encodeWeights(model, "F32"))) {
        mkdirSync(dirname(join(dir, "t1", f.name)), { recursive: true })
        writeFileSync(join(dir, "t1", f.name), f.bytes)
      }
      for (const [dtype, round] of [
        ["f32", (x: number) => x],
        ["bf16", (x: number) => bf16Round(Float32Array.of(x))[0] as number],
      ] as const) {
        const out = join(dir, dtype)
        const run = spawnSync(
          torchPython as string,
          [RESAVE, join(dir, "t1"), out, "300000", dtype],
          {
            encoding: "utf8",
          },
        )
        expect(run.stderr).toBe("")
        expect(run.status).toBe(0)
        const read = readHfCheckpoint(out, { expected: model.config })
        expect(read.critic).toBe(true)
        expect(read.files.filter((f) => f.startsWith("model-")).length).toBeGreaterThan(1)
        const got = new Map(read.model.entries().map((e) => [e.name, e.data]))
        let gap = 0
        for (const e of model.entries()) {
          const g = got.get(e.name)
          expect(g, e.name).toBeDefined()
          for (let i = 0; i < e.data.length; i++)
            gap = Math.max(
              gap,
              Math.abs(round(e.data[i] as number) - ((g as ArrayLike<number>)[i] as number)),
            )
        }
        console.log(
          `qwen3 resave (${dtype}): ${read.files.length} files read by t1, max |Δ| ${gap} against the ${dtype === "f32" ? "original" : "bf16-rounded"} parameters`,
        )
        expect(gap).toBe(0)
      }
      rmSync(dir, { recursive: true, force: true })
    }, 120_000)
  },
)
