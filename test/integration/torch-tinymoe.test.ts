/**
 * The PyTorch TinyMoE of the reference external learner (clients/python/t1_trainer) against the
 * TypeScript model on the same weights file: the same log-probabilities (the sampler's and the
 * learner's numbers are comparable across frameworks), the same router choices, and under R3 the
 * same replayed experts and outputs. Runs clients/python/tests/parity.py with the first of
 * $T1_PYTHON, python3, /usr/bin/python3 that imports torch; CI installs Debian's python3-torch.
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { encodeWeights, TinyMoe } from "../../model/index.ts"

const SCRIPT = fileURLToPath(new URL("../../clients/python/tests/parity.py", import.meta.url))

const python = [process.env.T1_PYTHON, "python3", "/usr/bin/python3"].find(
  (p) => p !== undefined && spawnSync(p, ["-c", "import torch"]).status === 0,
)
if (python === undefined && process.env.CI === "true")
  throw new Error("CI needs PyTorch for the reference learner (Debian python3-torch)")

interface TorchScores {
  readonly version: number
  readonly logprobs: number[][]
  readonly replayed_logprobs: number[][]
  readonly routing: number[][][]
  readonly replayed_routing: number[][][]
  readonly values: number[]
}

const logSoftmaxRows = (logits: ArrayLike<number>, rows: number, n: number): number[][] =>
  Array.from({ length: rows }, (_, r) => {
    let max = Number.NEGATIVE_INFINITY
    for (let j = 0; j < n; j++) max = Math.max(max, logits[r * n + j] as number)
    let sum = 0
    for (let j = 0; j < n; j++) sum += Math.exp((logits[r * n + j] as number) - max)
    const lse = max + Math.log(sum)
    return Array.from({ length: n }, (_, j) => (logits[r * n + j] as number) - lse)
  })

const maxAbsDiff = (a: number[][], b: number[][]) => {
  let m = 0
  for (let r = 0; r < a.length; r++)
    for (let j = 0; j < (a[r]?.length ?? 0); j++)
      m = Math.max(m, Math.abs((a[r]?.[j] ?? 0) - (b[r]?.[j] ?? Number.NaN)))
  return m
}

describe.skipIf(python === undefined)(
  "PyTorch TinyMoE (reference learner) = TypeScript TinyMoE",
  () => {
    it("same log-probs, router choices and values; under R3 the same replayed experts and outputs", () => {
      const model = TinyMoe.create({ config: { vocabSize: 300, maxSeqLen: 256 }, seed: 5 })
      const c = model.config
      const ids = Array.from({ length: 96 }, (_, i) => (i * 37 + 11) % c.vocabSize)
      const own = model.score(ids, { tape: false })
      // A routing the router would not choose: each choice moved to the next expert.
      const replay = own.routing.map((e) => (e + 1) % c.nExperts) as Uint8Array
      const replayed = model.score(ids, { replay, tape: false })

      const dir = mkdtempSync(join(tmpdir(), "t1-torch-parity-"))
      writeFileSync(join(dir, "weights.safetensors"), encodeWeights(model, "F32", { version: 4n }))
      writeFileSync(join(dir, "ids.json"), JSON.stringify(ids))
      writeFileSync(join(dir, "replay.bin"), replay)
      const run = spawnSync(python as string, [SCRIPT, dir], { encoding: "utf8" })
      expect(run.stderr).toBe("")
      expect(run.status).toBe(0)
      const torch = JSON.parse(readFileSync(join(dir, "torch.json"), "utf8")) as TorchScores

      expect(torch.version).toBe(4)
      const ts = logSoftmaxRows(own.logits, ids.length, c.vocabSize)
      const tsReplayed = logSoftmaxRows(replayed.logits, ids.length, c.vocabSize)
      // f32 on both sides, summed in different orders: agreement to float32 rounding.
      expect(maxAbsDiff(torch.logprobs, ts)).toBeLessThan(1e-4)
      expect(maxAbsDiff(torch.replayed_logprobs, tsReplayed)).toBeLessThan(1e-4)
      expect(torch.routing.flat(2)).toEqual(Array.from(own.routing))
      expect(torch.replayed_routing.flat(2)).toEqual(Array.from(replay))
      // Replay is not a no-op: the replayed experts change the outputs, on both sides alike.
      expect(maxAbsDiff(tsReplayed, ts)).toBeGreaterThan(1e-3)
      for (let i = 0; i < ids.length; i++)
        expect(Math.abs((torch.values[i] ?? 0) - (own.values[i] ?? 0))).toBeLessThan(1e-4)
    })
  },
)
