import { describe, expect, it } from "vitest"
import { encodeSafetensors, SafetensorsError } from "../weights/index.ts"
import { TinyMoe } from "./model.ts"
import { decodeWeights, encodeWeights } from "./weights.ts"

const config = {
  vocabSize: 32,
  dModel: 16,
  nLayers: 2,
  nHeads: 2,
  nExperts: 4,
  topK: 2,
  dFf: 24,
  maxSeqLen: 64,
}

const maxDiff = (a: TinyMoe, b: TinyMoe) => {
  const eb = b.entries()
  let max = 0
  a.entries().forEach((e, k) => {
    const other = eb[k]?.data as ArrayLike<number>
    for (let i = 0; i < e.data.length; i++)
      max = Math.max(max, Math.abs((e.data[i] as number) - (other[i] as number)))
  })
  return max
}

describe("TinyMoE weights in safetensors", () => {
  it("initialisation is deterministic from the seed, and different seeds differ", () => {
    const a = encodeWeights(TinyMoe.create({ config, seed: 42 }))
    const b = encodeWeights(TinyMoe.create({ config, seed: 42 }))
    const c = encodeWeights(TinyMoe.create({ config, seed: 43 }))
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true)
    expect(Buffer.from(a).equals(Buffer.from(c))).toBe(false)
  })

  it("round-trips exactly in F32 (with config and version) and within bf16 rounding in BF16", () => {
    const model = TinyMoe.create({ config, seed: 1 })
    const back = decodeWeights(encodeWeights(model, "F32", { version: 17n }))
    expect(back.version).toBe(17n)
    expect(back.model.config).toEqual(model.config)
    expect(maxDiff(model, back.model)).toBe(0)
    const bf16 = decodeWeights(encodeWeights(model, "BF16"))
    const diff = maxDiff(model, bf16.model)
    expect(diff).toBeGreaterThan(0)
    expect(diff).toBeLessThan(2 ** -8)
    const f64 = decodeWeights(encodeWeights(model, "F64"), "f64")
    expect(maxDiff(model, f64.model)).toBe(0)
  })

  it("refuses files that are not a complete TinyMoE checkpoint, naming the tensor", () => {
    const model = TinyMoe.create({ config, seed: 1 })
    const foreign = encodeSafetensors(
      new Map([["x", { dtype: "F32", shape: [1], data: new Float32Array(1) }]]),
    )
    expect(() => decodeWeights(foreign)).toThrow(/__metadata__\.format/)
    const tensors = new Map(
      model
        .entries()
        .map((e) => [
          e.name,
          { dtype: "F32" as const, shape: e.shape, data: Float32Array.from(e.data) },
        ]),
    )
    const meta = { format: "t1-tinymoe", config: JSON.stringify(model.config) }
    const missing = new Map(tensors)
    missing.delete("layers.1.router")
    expect(() => decodeWeights(encodeSafetensors(missing, meta))).toThrow(SafetensorsError)
    expect(() => decodeWeights(encodeSafetensors(missing, meta))).toThrow(
      /layers\.1\.router.*missing/,
    )
    const wrongShape = new Map(tensors)
    wrongShape.set("lmHead", { dtype: "F32", shape: [32, 16], data: new Float32Array(512) })
    expect(() => decodeWeights(encodeSafetensors(wrongShape, meta))).toThrow(
      /lmHead.*shape \[32, 16\], expected \[16, 32\]/,
    )
    expect(() =>
      decodeWeights(encodeSafetensors(tensors, { ...meta, config: '{"topK": 9}' })),
    ).toThrow(/topK/)
  })

  it("refuses a header config that outgrows the file before allocating for it (found by npm run test:fuzz)", () => {
    const model = TinyMoe.create({ config, seed: 1 })
    const tensors = new Map(
      model
        .entries()
        .map((e) => [
          e.name,
          { dtype: "F32" as const, shape: e.shape, data: Float32Array.from(e.data) },
        ]),
    )
    const withConfig = (patch: object) =>
      encodeSafetensors(tensors, {
        format: "t1-tinymoe",
        config: JSON.stringify({ ...model.config, ...patch }),
      })
    // Each used to allocate first: a RangeError (invalid typed array length) or gigabytes.
    expect(() => decodeWeights(withConfig({ vocabSize: 2 ** 40 }))).toThrow(
      /embed.*shape \[32, 16\], expected \[1099511627776, 16\]/,
    )
    expect(() => decodeWeights(withConfig({ dFf: 1e9 }))).toThrow(SafetensorsError)
    expect(() => decodeWeights(withConfig({ nLayers: 1e9 }))).toThrow(
      /layers\.2\.attnNorm.*missing/,
    )
    expect(() => decodeWeights(withConfig({ maxSeqLen: 2 ** 31 }))).toThrow(
      /__metadata__\.config\.maxSeqLen.*at most 1048576/,
    )
  })
})
