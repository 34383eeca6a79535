import { afterAll, describe, expect, it } from "vitest"
import { makeSimdKernels } from "../kernels/simd.ts"
import { Rng } from "../rng.ts"
import { TinyMoe } from "./model.ts"
import { closeGradientWorkers, gradientWorkerCount, resolveThreads } from "./parallel.ts"
import { paramEntries } from "./params.ts"
import { type SupervisedSequence, supervisedGradients } from "./train.ts"

const config = {
  vocabSize: 64,
  dModel: 32,
  nLayers: 2,
  nHeads: 4,
  nExperts: 4,
  topK: 2,
  dFf: 48,
  maxSeqLen: 160,
}

const batchOf = (seed: number, lengths: ReadonlyArray<number>, replay = false) => {
  const rng = new Rng(seed)
  return lengths.map((n): SupervisedSequence => {
    const ids = Array.from({ length: n }, () => Math.floor(rng.next() * config.vocabSize))
    const weights = Array.from({ length: n - 1 }, () => (rng.next() < 0.3 ? 0 : rng.next()))
    if (!replay) return { ids, weights }
    const routing = new Uint8Array(n * config.nLayers * config.topK)
    for (let i = 0; i < routing.length; i += 2) {
      routing[i] = Math.floor(rng.next() * 4)
      routing[i + 1] = ((routing[i] as number) + 1 + Math.floor(rng.next() * 3)) % 4
    }
    return { ids, weights, routing }
  })
}

const bits = (model: TinyMoe, g: ReturnType<typeof supervisedGradients>) => {
  if (!g.grads) throw new Error("no gradients")
  return paramEntries(model.config, g.grads).map((e) => ({
    name: e.name,
    data: Array.from(e.data),
  }))
}

afterAll(async () => {
  await closeGradientWorkers()
})

describe("data-parallel gradients on worker threads", () => {
  it.each([
    ["f32, simd kernels", "f32", "simd", false],
    ["f64, reference kernels, replayed routing", "f64", "reference", true],
  ] as const)(
    "equal the single-threaded sum bit for bit (%s)",
    (_label, precision, kernels, replay) => {
      const model = TinyMoe.create({
        config,
        seed: 4,
        precision,
        ...(kernels === "simd" ? { kernels: makeSimdKernels() } : {}),
      })
      // Uneven lengths, one longer than an attention tile.
      const batch = batchOf(9, [20, 150, 7, 33, 64, 2], replay)
      const single = supervisedGradients(model, batch, 0.05, { threads: 1 })
      for (const threads of [2, 3]) {
        const parallel = supervisedGradients(model, batch, 0.05, { threads })
        expect(parallel.loss).toBe(single.loss)
        expect(parallel.auxLoss).toBe(single.auxLoss)
        expect(bits(model, parallel)).toEqual(bits(model, single))
      }
      expect(gradientWorkerCount()).toBeGreaterThan(0)
    },
  )

  it("report a sequence that fails (on whichever thread claims it), and keep working afterwards", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    const batch = batchOf(3, [10, 10, 10, 10])
    const bad = [...batch, { ids: [1, 2, 999], weights: [1, 1] }]
    expect(() => supervisedGradients(model, bad, 0, { threads: 2 })).toThrow(
      /outside the vocabulary/,
    )
    const single = supervisedGradients(model, batch, 0, { threads: 1 })
    expect(bits(model, supervisedGradients(model, batch, 0, { threads: 2 }))).toEqual(
      bits(model, single),
    )
  })

  it("auto uses one thread for small batches and kernels a worker cannot rebuild", () => {
    const model = TinyMoe.create({ config, seed: 4 })
    expect(resolveThreads(model, batchOf(1, [16, 16]))).toBe(1)
    expect(resolveThreads(model, batchOf(1, [16]), 4)).toBe(1)
    expect(resolveThreads(model, batchOf(1, [16, 16, 16]), 8)).toBe(3)
    const custom = model.withKernels({ ...makeSimdKernels(), name: "custom" })
    expect(resolveThreads(custom, batchOf(1, [16, 16]), 2)).toBe(1)
    expect(() => resolveThreads(model, batchOf(1, [16, 16]), 0)).toThrow(RangeError)
    process.env.T1_MODEL_THREADS = "2"
    try {
      expect(resolveThreads(model, batchOf(1, [16, 16, 16]))).toBe(2)
      expect(resolveThreads(model, batchOf(1, [16, 16, 16]), 1)).toBe(1)
    } finally {
      delete process.env.T1_MODEL_THREADS
    }
  })

  it("closeGradientWorkers terminates every worker", async () => {
    const model = TinyMoe.create({ config, seed: 4 })
    supervisedGradients(model, batchOf(2, [12, 12]), 0, { threads: 2 })
    expect(gradientWorkerCount()).toBeGreaterThan(0)
    await closeGradientWorkers()
    expect(gradientWorkerCount()).toBe(0)
  })
})
