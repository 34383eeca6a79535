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
    const shards = files.filter((f) => f.name.endsWith(".safetensors"))
    expect(shards.length).toBeGreaterThan(1)
    expect(shards[0]?.name).toBe(
      `model-00001-of-${String(shards.length).padStart(5, "0")}.safetensors`,
    )
    const index = JSON.parse(
      new TextDecoder().decode(files.find((f) => f.name === "model.safetensors.index.json")?.bytes),
    ) as { metadata: { total_size: number }; weight_map: Record<string, string> }
    const original = decodeSafetensors(weights).tensors
    expect(Object.keys(index.weight_map).sort()).toEqual([...original.keys()].sort())
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
    const files = hfCheckpointFiles(weights, { config: { architectures: ["T1TinyMoe"] } })
    const config = JSON.parse(
      new TextDecoder().decode(files.find((f) => f.name === "config.json")?.bytes),
    ) as Record<string, unknown>
    expect(config).toMatchObject({
      vocabSize: 300,
      nLayers: 2,
      t1_policy_version: "7",
      architectures: ["T1TinyMoe"],
    })
    expect(files.filter((f) => f.name.endsWith(".safetensors")).length).toBe(1)
  })
})
