import { describe, expect, it } from "vitest"
import { referenceKernels } from "../kernels/reference.ts"
import { selectKernels } from "../kernels/select.ts"
import { Rng } from "../rng.ts"
import { tokenLogprobs } from "./losses.ts"
import { TinyMoe } from "./model.ts"

const config = {
  vocabSize: 96,
  dModel: 32,
  nLayers: 2,
  nHeads: 4,
  nExperts: 4,
  topK: 2,
  dFf: 48,
  maxSeqLen: 200,
}

/** Grouped-query attention (2 key/value heads serve 4 query heads) with heads wider than d / H. */
const gqa = { ...config, nKvHeads: 2, headDim: 12 }

describe.each([
  { label: "auto kernels: bit for bit", kernels: selectKernels("auto"), tolerance: 0, config },
  {
    label: "reference kernels: to f32 rounding",
    kernels: referenceKernels,
    tolerance: 1e-5,
    config,
  },
  {
    label: "a dense layer and tied embeddings, auto kernels: bit for bit",
    kernels: selectKernels("auto"),
    tolerance: 0,
    config: { ...config, mlpOnlyLayers: [0], tieWordEmbeddings: true },
  },
  {
    label: "GQA, auto kernels: bit for bit",
    kernels: selectKernels("auto"),
    tolerance: 0,
    config: gqa,
  },
])(
  "forward paths agree: tiled runs of rows, decode rows, chunked prefill ($label)",
  ({ kernels, tolerance, config }) => {
    const model = TinyMoe.create({ config, seed: 11, kernels })
    const rng = new Rng(5)
    const ids = Array.from({ length: 150 }, () => Math.floor(rng.next() * config.vocabSize))
    const V = config.vocabSize

    const logprobsOf = (chunks: ReadonlyArray<number>) => {
      const cache = model.newCache(ids.length)
      const logits = new Float32Array(ids.length * V)
      const routing: number[] = []
      let at = 0
      for (const size of chunks) {
        const result = model.forward(
          ids.slice(at, at + size).map((token) => ({ cache, token })),
          {},
        )
        logits.set(result.logits, at * V)
        routing.push(...result.routing)
        at += size
      }
      expect(at).toBe(ids.length)
      return { lp: tokenLogprobs(logits, ids.slice(1), V), routing }
    }

    it("one prefill of 150 positions (3 attention tiles), one row at a time, and uneven chunks", () => {
      const whole = logprobsOf([150])
      const rows = logprobsOf(Array.from({ length: 150 }, () => 1))
      const chunks = logprobsOf([10, 70, 1, 2, 3, 64])
      for (const other of [rows, chunks]) {
        expect(other.routing).toEqual(whole.routing)
        let worst = 0
        for (let i = 0; i < whole.lp.length; i++)
          worst = Math.max(worst, Math.abs((whole.lp[i] as number) - (other.lp[i] as number)))
        expect(worst).toBeLessThanOrEqual(tolerance)
      }
    })
  },
)

describe("a cache that grows as it fills", () => {
  const big = { ...config, maxSeqLen: 700 }
  const model = TinyMoe.create({ config: big, seed: 12, kernels: selectKernels("auto") })
  const rng = new Rng(6)
  const ids = Array.from({ length: 600 }, () => Math.floor(rng.next() * big.vocabSize))

  it("gives the same logits row by row (grown 256 → 512 → 700) as in one prefill, bit for bit", () => {
    const grown = model.newCache(700)
    const rows: number[] = []
    for (const token of ids) rows.push(...model.forward([{ cache: grown, token }], {}).logits)
    const once = model.newCache(700)
    const whole = model.forward(
      ids.map((token) => ({ cache: once, token })),
      {},
    )
    expect(grown.length).toBe(600)
    expect(Float32Array.from(rows)).toEqual(Float32Array.from(whole.logits))
    // And as the training path's forward with a tape, whose activations are fresh arrays.
    const tapedCache = model.newCache(700)
    const taped = model.forward(
      ids.map((token) => ({ cache: tapedCache, token })),
      { tape: true },
    )
    expect(Float32Array.from(taped.logits)).toEqual(Float32Array.from(whole.logits))
  })

  it("refuses positions past its capacity", () => {
    const cache = model.newCache(300)
    expect(() =>
      model.forward(
        ids.slice(0, 301).map((token) => ({ cache, token })),
        {},
      ),
    ).toThrow(/exceeds the cache capacity of 300 positions/)
    expect(() => cache.reserve(301)).toThrow(/capacity of 300/)
  })
})
