import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { ModelGeometryError, parseModelGeometry } from "./geometry.ts"

const config = (name: string) =>
  readFileSync(new URL(`./fixtures/configs/${name}`, import.meta.url), "utf8")

const geometry = (text: string) => {
  const g = parseModelGeometry(text, "config.json")
  if (g === undefined) throw new Error("no geometry")
  return g
}

describe("MoE geometry from config.json", () => {
  it("Qwen3-30B-A3B: 48 layers, all MoE, top-8 of 128", () => {
    const g = geometry(config("qwen3-30b-a3b.json"))
    expect([g.modelType, g.hiddenLayers, g.moeLayers.length, g.topK, g.numExperts]).toEqual([
      "qwen3_moe",
      48,
      48,
      8,
      128,
    ])
  })

  it("DeepSeek-V3: 58 MoE layers of 61 (the first 3 dense), top-8 of 256 routed experts", () => {
    const g = geometry(config("deepseek-v3.json"))
    expect([g.hiddenLayers, g.moeLayers.length, g.topK, g.numExperts]).toEqual([61, 58, 8, 256])
    expect(g.moeLayers.slice(0, 2)).toEqual([3, 4])
    expect(g.moeLayers[g.moeLayers.length - 1]).toBe(60)
  })

  it("honours mlp_only_layers and decoder_sparse_step", () => {
    const g = geometry(
      JSON.stringify({
        model_type: "qwen2_moe",
        num_hidden_layers: 6,
        num_experts: 16,
        num_experts_per_tok: 2,
        decoder_sparse_step: 2,
        mlp_only_layers: [3],
      }),
    )
    expect(g.moeLayers).toEqual([1, 5])
  })

  it("has none for a dense model, and refuses a broken count, naming the file", () => {
    const dense = JSON.stringify({ model_type: "llama", num_hidden_layers: 32 })
    expect(parseModelGeometry(dense, "llama/config.json")).toBeUndefined()
    const broken = JSON.stringify({
      num_hidden_layers: "48",
      num_experts: 128,
      num_experts_per_tok: 8,
    })
    expect(() => parseModelGeometry(broken, "q/config.json")).toThrow(ModelGeometryError)
    expect(() => parseModelGeometry(broken, "q/config.json")).toThrow(
      /^q\/config.json: num_hidden_layers must be a non-negative integer, got "48"/,
    )
  })
})
