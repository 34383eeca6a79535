import { describe, expect, it } from "vitest"
import { TinyMoe } from "../moe/index.ts"
import { encodeWeights } from "../moe/weights.ts"
import { hfCheckpointFiles } from "./hf-checkpoint.ts"
import { decodeSafetensors } from "./safetensors.ts"

const model = TinyMoe.create({ config: { vocabSize: 300, nLayers: 2 }, seed: 3 })
const weights = encodeWeights(model, "F32", { version: 7n })

describe("hfCheckpointFiles", () => {
  it("shards the tensors under the size limit, indexes every tensor, and keeps their values", () => {
    const files = hfCheckpointFiles(weights, { maxShardBytes: 64 * 1024 })
    const shards = files.filter((f) => /^model-.*\.safetensors$/.test(f.name))
    expect(shards.length).toBeGreaterThan(1)
    expect(shards[0]?.name).toBe(
      `model-00001-of-${String(shards.length).padStart(5, "0")}.safetensors`,
    )
    const index = JSON.parse(
      new TextDecoder().decode(files.find((f) => f.name === "model.safetensors.index.json")?.bytes),
    ) as { metadata: { total_size: number }; weight_map: Record<string, string> }
    const original = decodeSafetensors(weights).tensors
    const policy = [...original.keys()].filter((n) => !n.startsWith("value_head."))
    expect(Object.keys(index.weight_map).sort()).toEqual(policy.sort())
    // The critic is kept apart, outside the index and the top level engines read.
    const critic = files.find((f) => f.name === "critic/value_head.safetensors")
    expect([...decodeSafetensors(critic?.bytes as Uint8Array).tensors.keys()].sort()).toEqual([
      "value_head.bias",
      "value_head.weight",
    ])
    let total = 0
    for (const shard of shards) {
      const { tensors } = decodeSafetensors(shard.bytes)
      for (const [name, t] of tensors) {
        expect(index.weight_map[name]).toBe(shard.name)
        expect(t.data).toEqual(original.get(name)?.data)
        total += t.data.byteLength
      }
    }
    expect(index.metadata.total_size).toBe(total)
  })

  it("writes config.json from the weights' config, with the policy version and overrides", () => {
    const files = hfCheckpointFiles(weights, { config: { max_position_embeddings: 4096 } })
    const config = JSON.parse(
      new TextDecoder().decode(files.find((f) => f.name === "config.json")?.bytes),
    ) as Record<string, unknown>
    expect(config).toMatchObject({
      model_type: "qwen3_moe",
      architectures: ["Qwen3MoeForCausalLM"],
      vocab_size: 300,
      num_hidden_layers: 2,
      t1_policy_version: "7",
      max_position_embeddings: 4096,
    })
    expect(files.filter((f) => /^model-.*\.safetensors$/.test(f.name)).length).toBe(1)
  })

  it("writes the model directory's other files as given, and refuses ones that would clash", () => {
    const tokenizer = { name: "tokenizer.json", bytes: new TextEncoder().encode("{}") }
    const files = hfCheckpointFiles(weights, { extraFiles: [tokenizer] })
    expect(files.find((f) => f.name === "tokenizer.json")?.bytes).toEqual(tokenizer.bytes)
    for (const name of ["config.json", "model.safetensors", "../x.json"])
      expect(() =>
        hfCheckpointFiles(weights, { extraFiles: [{ name, bytes: new Uint8Array() }] }),
      ).toThrow(/extraFiles/)
  })
})
