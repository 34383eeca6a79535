import { describe, expect, it } from "vitest"
import {
  decodeSafetensors,
  encodeSafetensors,
  SafetensorsError,
  type Tensor,
} from "../weights/index.ts"
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

  it("holds the Hugging Face Qwen3-MoE state dict plus the critic, with config.json in the header", () => {
    const model = TinyMoe.create({ config, seed: 1 })
    const { tensors, metadata } = decodeSafetensors(encodeWeights(model))
    expect(metadata.format).toBe("pt")
    expect(JSON.parse(metadata.config ?? "{}")).toMatchObject({
      model_type: "qwen3_moe",
      architectures: ["Qwen3MoeForCausalLM"],
      hidden_size: 16,
      num_experts: 4,
    })
    expect(tensors.get("model.layers.1.mlp.experts.3.down_proj.weight")?.shape).toEqual([16, 24])
    expect(tensors.get("lm_head.weight")?.shape).toEqual([32, 16])
    expect(tensors.get("value_head.weight")?.shape).toEqual([1, 16])
    // [out, in]: lm_head row v is the column v of t1's [d, V] matrix.
    const lm = tensors.get("lm_head.weight")?.data as Float32Array
    expect(lm[5 * 16 + 3]).toBe(model.params.lmHead[3 * 32 + 5])
  })

  it("reads a Hugging Face file without t1's metadata when given the config, critic zero", () => {
    const model = TinyMoe.create({ config, seed: 1 })
    const { tensors } = decodeSafetensors(encodeWeights(model))
    tensors.delete("value_head.weight")
    tensors.delete("value_head.bias")
    const plain = encodeSafetensors(tensors, { format: "pt" })
    expect(() => decodeWeights(plain)).toThrow(/__metadata__\.config.*missing/)
    const back = decodeWeights(plain, "f32", undefined, { config: model.config })
    expect(back.critic).toBe(false)
    expect(back.model.params.valueHead.every((v) => v === 0)).toBe(true)
    expect(
      maxDiff(
        TinyMoe.fromParams(
          model.config,
          { ...model.params, valueHead: back.model.params.valueHead },
          "f32",
        ),
        back.model,
      ),
    ).toBe(0)
    expect(() =>
      decodeWeights(encodeWeights(model), "f32", undefined, {
        config: { ...model.config, dFf: 32 },
      }),
    ).toThrow(/another model: dFf: 24, expected 32/)
  })

  it("refuses files that are not a complete checkpoint of the model, naming the tensor", () => {
    const model = TinyMoe.create({ config, seed: 1 })
    const foreign = encodeSafetensors(
      new Map([["x", { dtype: "F32", shape: [1], data: new Float32Array(1) }]]),
    )
    expect(() => decodeWeights(foreign)).toThrow(/__metadata__\.config/)
    const { tensors, metadata } = decodeSafetensors(encodeWeights(model))
    const with_ = (edit: (m: Map<string, Tensor>) => void, meta = metadata) => {
      const copy = new Map(tensors)
      edit(copy)
      return () => decodeWeights(encodeSafetensors(copy, meta))
    }
    expect(with_((m) => m.delete("model.layers.1.mlp.gate.weight"))).toThrow(SafetensorsError)
    expect(with_((m) => m.delete("model.layers.1.mlp.gate.weight"))).toThrow(
      /model\.layers\.1\.mlp\.gate\.weight.*missing/,
    )
    expect(
      with_((m) =>
        m.set("lm_head.weight", { dtype: "F32", shape: [16, 32], data: new Float32Array(512) }),
      ),
    ).toThrow(/lm_head\.weight.*shape \[16, 32\], expected \[32, 16\]/)
    expect(
      with_((m) =>
        m.set("model.norm.weight", { dtype: "I32", shape: [16], data: new Int32Array(16) }),
      ),
    ).toThrow(/model\.norm\.weight.*dtype I32/)
    const nan = Float32Array.from(tensors.get("model.norm.weight")?.data as Float32Array)
    nan[3] = Number.NaN
    expect(
      with_((m) => m.set("model.norm.weight", { dtype: "F32", shape: [16], data: nan })),
    ).toThrow(/model\.norm\.weight.*NaN at flat index 3 is not finite/)
    const inf = Float32Array.from(tensors.get("lm_head.weight")?.data as Float32Array)
    inf[0] = Number.POSITIVE_INFINITY
    expect(
      with_((m) => m.set("lm_head.weight", { dtype: "F32", shape: [32, 16], data: inf })),
    ).toThrow(/lm_head\.weight.*Infinity/)
    expect(
      with_((m) =>
        m.set(
          "model.layers.0.mlp.shared_expert.weight",
          tensors.get("model.norm.weight") as Tensor,
        ),
      ),
    ).toThrow(/shared_expert.*is not a tensor of this Qwen3-MoE config/)
    expect(with_((m) => m.delete("value_head.bias"))).toThrow(/value_head\.bias.*missing/)
    const mixtral = JSON.stringify({
      ...JSON.parse(metadata.config ?? "{}"),
      model_type: "mixtral",
    })
    expect(with_(() => {}, { ...metadata, config: mixtral })).toThrow(
      /model_type.*qwen3_moe.*mixtral/,
    )
  })

  it("refuses a header config that outgrows the file before allocating for it (found by npm run test:fuzz)", () => {
    const model = TinyMoe.create({ config, seed: 1 })
    const { tensors, metadata } = decodeSafetensors(encodeWeights(model))
    const withConfig = (patch: object) =>
      encodeSafetensors(tensors, {
        ...metadata,
        config: JSON.stringify({ ...JSON.parse(metadata.config ?? "{}"), ...patch }),
      })
    // Each used to allocate first: a RangeError (invalid typed array length) or gigabytes.
    expect(() => decodeWeights(withConfig({ vocab_size: 2 ** 40 }))).toThrow(
      /embed_tokens.*shape \[32, 16\], expected \[1099511627776, 16\]/,
    )
    expect(() => decodeWeights(withConfig({ moe_intermediate_size: 1e9 }))).toThrow(
      SafetensorsError,
    )
    expect(() => decodeWeights(withConfig({ num_hidden_layers: 1e9 }))).toThrow(
      /model\.layers\.2\..*missing/,
    )
    expect(() => decodeWeights(withConfig({ max_position_embeddings: 2 ** 31 }))).toThrow(
      /max_position_embeddings.*at most 1048576/,
    )
  })
})
