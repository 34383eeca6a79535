import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { hfCheckpointFiles } from "../weights/hf-checkpoint.ts"
import { decodeSafetensors, encodeSafetensors } from "../weights/safetensors.ts"
import { readHfCheckpoint } from "./hf-dir.ts"
import { TinyMoe } from "./model.ts"
import { encodeWeights } from "./weights.ts"

const config = {
  vocabSize: 40,
  dModel: 16,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  nExperts: 4,
  topK: 2,
  dFf: 8,
  maxSeqLen: 64,
}
const model = TinyMoe.create({ config, seed: 9 })
const root = mkdtempSync(join(tmpdir(), "t1-hf-dir-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

let n = 0
const writeDir = (files: ReadonlyArray<{ name: string; bytes: Uint8Array }>) => {
  const dir = join(root, `d${n++}`)
  for (const f of files) {
    mkdirSync(dirname(join(dir, f.name)), { recursive: true })
    writeFileSync(join(dir, f.name), f.bytes)
  }
  return dir
}
const exported = () => hfCheckpointFiles(encodeWeights(model), { maxShardBytes: 8 * 1024 })
const sameParams = (a: TinyMoe, b: TinyMoe) =>
  a.entries().every((e, k) => e.data.every((v, i) => v === b.entries()[k]?.data[i]))

describe("readHfCheckpoint", () => {
  it("reads a model with dense MLP layers (mlp_only_layers, intermediate_size) under Qwen3MoeMLP's names", () => {
    const mixed = TinyMoe.create({
      config: { ...config, nLayers: 3, mlpOnlyLayers: [0], denseFf: 12 },
      seed: 4,
    })
    const files = hfCheckpointFiles(encodeWeights(mixed))
    const index = JSON.parse(
      new TextDecoder().decode(files.find((f) => f.name === "model.safetensors.index.json")?.bytes),
    ) as { weight_map: Record<string, string> }
    const names = Object.keys(index.weight_map)
    expect(names).toContain("model.layers.0.mlp.gate_proj.weight")
    expect(names).not.toContain("model.layers.0.mlp.gate.weight")
    expect(names).toContain("model.layers.1.mlp.experts.3.up_proj.weight")
    const configJson = JSON.parse(
      new TextDecoder().decode(files.find((f) => f.name === "config.json")?.bytes),
    ) as Record<string, unknown>
    expect(configJson).toMatchObject({ mlp_only_layers: [0], intermediate_size: 12 })
    const back = readHfCheckpoint(writeDir(files))
    expect(back.config).toEqual(mixed.config)
    expect(sameParams(mixed, back.model)).toBe(true)
  })

  it("reads a model with tied embeddings (no lm_head.weight, logits from the embedding)", () => {
    const tied = TinyMoe.create({ config: { ...config, tieWordEmbeddings: true }, seed: 4 })
    const files = hfCheckpointFiles(encodeWeights(tied))
    const index = JSON.parse(
      new TextDecoder().decode(files.find((f) => f.name === "model.safetensors.index.json")?.bytes),
    ) as { weight_map: Record<string, string> }
    expect(Object.keys(index.weight_map)).not.toContain("lm_head.weight")
    const back = readHfCheckpoint(writeDir(files))
    expect(back.config.tieWordEmbeddings).toBe(true)
    const ids = [1, 5, 9, 2]
    expect(Array.from(back.model.score(ids, {}).logits)).toEqual(
      Array.from(tied.score(ids, {}).logits),
    )
  })

  it("reads back an exported directory (sharded, with its critic) exactly", () => {
    const files = exported()
    expect(files.filter((f) => /^model-/.test(f.name)).length).toBeGreaterThan(2)
    const back = readHfCheckpoint(writeDir(files), { expected: model.config })
    expect(back.critic).toBe(true)
    expect(back.config).toEqual(model.config)
    expect(sameParams(model, back.model)).toBe(true)
  })

  it("reads one model.safetensors without an index or a critic (another trainer's checkpoint)", () => {
    const { tensors } = decodeSafetensors(encodeWeights(model))
    tensors.delete("value_head.weight")
    tensors.delete("value_head.bias")
    const configJson = exported().find((f) => f.name === "config.json")
    const dir = writeDir([
      { name: "model.safetensors", bytes: encodeSafetensors(tensors, { format: "pt" }) },
      configJson as { name: string; bytes: Uint8Array },
    ])
    const back = readHfCheckpoint(dir)
    expect(back.critic).toBe(false)
    expect(back.files).toEqual(["model.safetensors"])
  })

  it("refuses, naming the file and tensor: no index, a missing shard, a tensor in the wrong shard, another model, another architecture", () => {
    const files = exported()
    const without = (name: string) => files.filter((f) => f.name !== name)
    const shards = files.filter((f) => /^model-/.test(f.name)).map((f) => f.name)
    const second = shards[1] as string
    expect(() => readHfCheckpoint(writeDir(without("model.safetensors.index.json")))).toThrow(
      /neither model\.safetensors\.index\.json.*nor model\.safetensors/,
    )
    expect(() => readHfCheckpoint(writeDir(without(second)))).toThrow(
      new RegExp(`${second.replace(/\./g, "\\.")}: file: missing`),
    )
    const index = files.find((f) => f.name === "model.safetensors.index.json")
    const parsed = JSON.parse(new TextDecoder().decode(index?.bytes)) as {
      weight_map: Record<string, string>
    }
    parsed.weight_map["model.norm.weight"] = shards[0] as string
    const moved = [
      ...without("model.safetensors.index.json"),
      {
        name: "model.safetensors.index.json",
        bytes: new TextEncoder().encode(JSON.stringify(parsed)),
      },
    ]
    expect(() => readHfCheckpoint(writeDir(moved))).toThrow(/model\.norm\.weight/)
    expect(() =>
      readHfCheckpoint(writeDir(files), { expected: { ...model.config, nExperts: 8 } }),
    ).toThrow(/config\.json: config: another model than the job's: nExperts: 4, expected 8/)
    const configJson = JSON.parse(
      new TextDecoder().decode(files.find((f) => f.name === "config.json")?.bytes),
    ) as Record<string, unknown>
    const llama = [
      ...without("config.json"),
      {
        name: "config.json",
        bytes: new TextEncoder().encode(
          JSON.stringify({
            ...configJson,
            model_type: "llama",
            architectures: ["LlamaForCausalLM"],
          }),
        ),
      },
    ]
    expect(() => readHfCheckpoint(writeDir(llama))).toThrow(/config\.json.*model_type.*llama/)
    const tied = [
      ...without("config.json"),
      {
        name: "config.json",
        bytes: new TextEncoder().encode(
          JSON.stringify({ ...configJson, tie_word_embeddings: true }),
        ),
      },
    ]
    // Tied embeddings are a Qwen3-MoE t1 computes, but then lm_head.weight is not a tensor of it.
    expect(() => readHfCheckpoint(writeDir(tied))).toThrow(
      /lm_head\.weight: is not a tensor of this Qwen3-MoE config/,
    )
  })
})
