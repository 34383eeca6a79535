import { describe, expect, it } from "vitest"
import { selectKernels } from "../kernels/select.ts"
import { Rng } from "../rng.ts"
import { generateBatch, type SamplingParams } from "./generate.ts"
import { TinyMoe } from "./model.ts"
import { PrefixCache } from "./prefix.ts"
import { Sequence } from "./sequence.ts"

const config = {
  vocabSize: 64,
  dModel: 32,
  nLayers: 2,
  nHeads: 4,
  nExperts: 8,
  topK: 2,
  dFf: 48,
  maxSeqLen: 256,
}
const params: SamplingParams = { temperature: 1, topP: 1, maxTokens: 24, stopTokenIds: new Set() }
const system = Array.from({ length: 70 }, (_, i) => (i * 7 + 3) % 64)
const users = [
  [5, 9, 2],
  [11, 40, 41, 42, 43, 44],
  [63, 0, 1, 2, 3, 4, 5, 6, 7, 8],
]

const generate = (model: TinyMoe, sequences: Sequence[]) =>
  generateBatch(
    model,
    sequences.map((sequence, i) => ({ sequence, params, rng: new Rng(100 + i) })),
  )

describe("PrefixCache", () => {
  it("generates exactly what full prompts give: tokens, log-probs, routing (auto kernels)", () => {
    const model = TinyMoe.create({ config, seed: 8, kernels: selectKernels("auto") })
    const plain = users.map((u) => {
      const s = new Sequence(model)
      s.append([...system, ...u])
      return s
    })
    const cache = new PrefixCache(model)
    cache.remember(system)
    const cached = users.map((u) => cache.start([...system, ...u]))
    expect(cache.stats).toEqual({ hits: 3, misses: 1, reusedTokens: 3 * system.length })
    const a = generate(model, plain)
    const b = generate(model, cached)
    expect(b).toEqual(a)
    plain.forEach((s, i) => {
      const c = cached[i] as Sequence
      expect(c.tokens).toEqual(s.tokens)
      expect(Array.from(c.routing())).toEqual(Array.from(s.routing()))
    })
  })

  it("reuses the longest held prefix, an exact match included, and keeps at most maxEntries", () => {
    const model = TinyMoe.create({ config, seed: 8, kernels: selectKernels("auto") })
    const cache = new PrefixCache(model, 2)
    cache.remember(system.slice(0, 10))
    cache.remember(system)
    const exact = cache.start(system)
    expect(exact.processed).toBe(system.length)
    exact.flush()
    const fresh = new Sequence(model)
    fresh.append(system)
    fresh.flush()
    expect(Array.from(exact.lastLogits ?? [])).toEqual(Array.from(fresh.lastLogits ?? []))
    expect(cache.start([...system.slice(0, 10), 1]).processed).toBe(10)
    cache.remember([1, 2, 3])
    expect(cache.size).toBe(2)
    expect(cache.start([9, 9]).processed).toBe(0)
  })

  it("a forked sequence continues independently of its source", () => {
    const model = TinyMoe.create({ config, seed: 8 })
    const s = new Sequence(model)
    s.append(system)
    s.flush()
    const f = s.fork(100)
    f.append([1, 2])
    f.flush()
    expect(s.processed).toBe(system.length)
    expect(f.processed).toBe(system.length + 2)
    expect(f.cache.capacity).toBe(100)
    expect(Array.from(f.routing(0, system.length))).toEqual(Array.from(s.routing()))
  })
})
