/**
 * The PyTorch reference learner's update (clients/python/t1_trainer) against t1's TypeScript
 * learner on the same batch and the same starting weights: episodes the TypeScript sampler
 * generated, cut into prompt, actions and observations, with rewards, groups and the buffer's
 * per-trajectory loss weights, as TakeBatch serves them. Both take two consecutive PPO updates
 * (two epochs of two minibatches each, in t1's seeded order) from the job's spec; their step
 * statistics and the weights they end with must agree to float32 rounding. A learner whose loss
 * differs only by the MoE load-balancing term (0.01 of it) lands far outside that tolerance.
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { create, toBinary } from "@bufbuild/protobuf"
import { describe, expect, it } from "vitest"
import { jobLearnerPlan, Trainer, trainingSequence } from "../../actors/learner/index.ts"
import { decodeWeights, encodeWeights, TinyMoe } from "../../model/index.ts"
import { selectKernels } from "../../model/kernels/select.ts"
import {
  BatchSchema,
  DType,
  JobKind,
  JobSpecSchema,
  type Trajectory,
  TrajectorySchema,
} from "../../proto/index.ts"
import { torchPython } from "../support/python.ts"
import { sampleEpisodes } from "../support/sampled-episodes.ts"

const SCRIPT = fileURLToPath(
  new URL("../../clients/python/tests/update_parity.py", import.meta.url),
)
const UPDATES = 2

const bytesOf = (a: Uint32Array | Float32Array) =>
  new Uint8Array(a.buffer, a.byteOffset, a.byteLength)

interface TorchStats {
  readonly policy_loss: number
  readonly value_loss: number
  readonly entropy: number
  readonly clipfrac: number
  readonly approx_kl: number
  readonly grad_norm: number
  readonly train_infer_logprob_abs_diff: number
  readonly rows: number
}

/** Max |a − b| over every tensor of two models of one config, and the tensor it is largest in. */
const weightGap = (a: TinyMoe, b: TinyMoe) => {
  const other = new Map(b.entries().map((e) => [e.name, e.data]))
  let gap = 0
  let where = ""
  for (const e of a.entries()) {
    const o = other.get(e.name)
    if (o === undefined) throw new Error(`${e.name} missing`)
    for (let i = 0; i < e.data.length; i++) {
      const d = Math.abs((e.data[i] as number) - (o[i] as number))
      if (d > gap) {
        gap = d
        where = e.name
      }
    }
  }
  return { gap, where }
}

describe.skipIf(torchPython === undefined)(
  "PyTorch reference learner update = TypeScript learner update",
  () => {
    it("same step statistics and the same weights after two PPO updates on one batch", async () => {
      // Grouped-query attention (2 key/value heads for 4 query heads): the backward through shared
      // key/value heads is compared too.
      const start = TinyMoe.create({ config: { vocabSize: 300, nKvHeads: 2 }, seed: 11 })
      const c = start.config
      const episodes = await sampleEpisodes(start.withKernels(selectKernels("auto")), {
        episodes: 8,
        promptTokens: 20,
        maxTokens: 48,
      })
      const rowsWidth = c.nLayers * c.topK
      const trajectories: Trajectory[] = episodes.map((e, i) => {
        // The policy's turn, an observation inside it (tokens 16..23 of the generation), and a
        // trailing observation after its last action (cut off by both learners).
        const tail = Array.from({ length: 5 }, (_, k) => (i * 13 + k * 7) % c.vocabSize)
        const ids = [...e.ids, ...tail]
        const mask = ids.map((_, j) => {
          const g = j - e.prompt
          return g >= 0 && j < e.ids.length && (g < 16 || g >= 24) ? 1 : 0
        })
        const logprobs = ids.map((_, j) =>
          j >= e.prompt && j < e.ids.length ? (e.logprobs[j - e.prompt] ?? 0) : 0,
        )
        const passed = i % 5
        return create(TrajectorySchema, {
          jobId: "parity",
          episodeId: `e${i}`,
          tokenIds: bytesOf(Uint32Array.from(ids)),
          logprobs: bytesOf(Float32Array.from(logprobs)),
          lossMask: Uint8Array.from(mask),
          routing: Uint8Array.from(e.routing),
          routingDtype: DType.DTYPE_UINT8,
          routingShape: [e.routing.length / rowsWidth, c.nLayers, c.topK],
          end: {
            jobId: "parity",
            episodeId: `e${i}`,
            reward: passed,
            testsTotal: 4,
            resolved: passed === 4,
            groupId: `g${i >> 1}`,
          },
        })
      })
      // An episode whose policy generated nothing: neither learner trains on it.
      trajectories.push(
        create(TrajectorySchema, {
          jobId: "parity",
          episodeId: "silent",
          tokenIds: bytesOf(Uint32Array.of(1, 2, 3)),
          logprobs: bytesOf(new Float32Array(3)),
          lossMask: new Uint8Array(3),
          end: { jobId: "parity", episodeId: "silent", reward: 0, testsTotal: 4 },
        }),
      )
      const batch = create(BatchSchema, {
        jobId: "parity",
        batchId: "b-1",
        trajectories,
        weights: [1, 0.5, 1, 0.25, 1, 1, 0.75, 1, 1],
      })
      const spec = create(JobSpecSchema, {
        name: "parity",
        kind: JobKind.TRAIN,
        seed: 7n,
        learner: { external: true, ppoSteps: 4, batchTrajectories: 9 },
      })

      // TypeScript: t1's learner, as the learner pool configures it from the spec.
      const tsUpdate = (auxLossCoef?: number) => {
        const config = jobLearnerPlan(spec).config
        const model = decodeWeights(encodeWeights(start, "F32")).model
        const trainer = new Trainer(
          model,
          auxLossCoef === undefined ? config : { ...config, auxLossCoef },
        )
        const stats = Array.from({ length: UPDATES }, () =>
          trainer.ppoStep(
            batch.trajectories.flatMap((t, i) => {
              const s = trainingSequence(t, 0n, batch.weights[i])
              if (s._tag === "Failure") throw new Error(s.failure.message)
              return s.success === undefined ? [] : [s.success]
            }),
          ),
        )
        return { model, stats }
      }
      const ts = tsUpdate()
      const noAux = tsUpdate(0)

      // PyTorch: the reference learner's functions on the same files.
      const dir = mkdtempSync(join(tmpdir(), "t1-torch-ppo-"))
      writeFileSync(join(dir, "weights.safetensors"), encodeWeights(start, "F32"))
      writeFileSync(join(dir, "spec.binpb"), toBinary(JobSpecSchema, spec))
      writeFileSync(join(dir, "batch.binpb"), toBinary(BatchSchema, batch))
      const run = spawnSync(torchPython as string, [SCRIPT, dir, String(UPDATES)], {
        encoding: "utf8",
      })
      expect(run.stderr).toBe("")
      expect(run.status).toBe(0)
      const torch = JSON.parse(readFileSync(join(dir, "torch-stats.json"), "utf8")) as TorchStats[]
      const torchModel = decodeWeights(
        new Uint8Array(readFileSync(join(dir, "torch-weights.safetensors"))),
      ).model

      const parity = weightGap(ts.model, torchModel)
      const control = weightGap(noAux.model, torchModel)
      const moved = weightGap(ts.model, start)
      console.log(
        `update parity: weights max |Δ| ${parity.gap.toExponential(2)} (${parity.where}); without the load-balancing term ${control.gap.toExponential(2)} (${control.where}); moved ${moved.gap.toExponential(2)}; stats ${JSON.stringify(
          ts.stats.map((s, u) => ({
            policy: [s.policyLoss, torch[u]?.policy_loss],
            value: [s.valueLoss, torch[u]?.value_loss],
            gradNorm: [s.gradNorm, torch[u]?.grad_norm],
            kl: [s.approxKl, torch[u]?.approx_kl],
            clipfrac: [s.clipfrac, torch[u]?.clipfrac],
          })),
        )}`,
      )
      const close = (a: number, b: number | undefined, tol: number) =>
        expect(Math.abs(a - (b ?? Number.NaN))).toBeLessThan(tol * (1 + Math.abs(a)))
      ts.stats.forEach((s, u) => {
        const t = torch[u] as TorchStats
        expect(t.rows).toBe(s.trainedEpisodeIds.length)
        expect(s.trainedEpisodeIds).toHaveLength(8)
        close(s.policyLoss, t.policy_loss, 1e-5)
        close(s.valueLoss, t.value_loss, 1e-5)
        close(s.entropy, t.entropy, 1e-5)
        close(s.approxKl, t.approx_kl, 1e-6)
        close(s.gradNorm, t.grad_norm, 1e-4)
        close(s.trainInferLogprobAbsDiff, t.train_infer_logprob_abs_diff, 1e-6)
        close(s.clipfrac, t.clipfrac, 1e-9)
      })
      // Two updates moved the weights by `moved`; the learners agree to a small part of it, and a
      // loss without the load-balancing term is told apart.
      expect(parity.gap).toBeLessThan(moved.gap * 1e-2)
      expect(control.gap).toBeGreaterThan(parity.gap * 10)
    }, 180_000)
  },
)
