/**
 * Issue 39, must show: an exported TinyMoE is a Qwen3-MoE checkpoint as Hugging Face defines one.
 * Its config.json carries every field of `Qwen3MoeConfig` (configuration_qwen3_moe.py) with the
 * value that describes the model, and its tensors are exactly the state dict
 * `Qwen3MoeForCausalLM` (modeling_qwen3_moe.py) has for that config: names, shapes, float dtypes;
 * the critic outside it. Both lists come from fixtures/qwen3-moe-hf.json, transcribed from those
 * source files at the commits it names, not from model/moe/hf.ts: a wrong export fails here, as
 * the mutated directories of the second test show.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { decodeSafetensors, encodeWeights, hfCheckpointFiles, TinyMoe } from "../../model/index.ts"
import type { TinyMoeConfig } from "../../model/moe/config.ts"
import { encodeSafetensors, type Tensor } from "../../model/weights/index.ts"

interface Spec {
  readonly name: string
  readonly shape: ReadonlyArray<string>
}

interface HfFixture {
  readonly source: Record<string, unknown>
  readonly config: {
    readonly class_fields: Record<string, unknown>
    readonly saved_by_save_pretrained: Record<string, unknown>
  }
  readonly state_dict: {
    readonly before_layers: Spec[]
    readonly layer_prefix: string
    readonly attention: Spec[]
    readonly attention_bias: Spec[]
    readonly sparse_mlp: Spec[]
    readonly expert_prefix: string
    readonly expert: Spec[]
    readonly dense_mlp: Spec[]
    readonly layer_norms: Spec[]
    readonly after_layers: Spec[]
    readonly tied_weights: Record<string, string>
  }
}

const FIXTURE = JSON.parse(
  readFileSync(fileURLToPath(new URL("./fixtures/qwen3-moe-hf.json", import.meta.url)), "utf8"),
) as HfFixture

type Json = Record<string, unknown>

const num = (c: Json, field: string): number => {
  const v = c[field]
  if (typeof v !== "number") throw new Error(`config.json ${field}: not a number`)
  return v
}

/** The head width Qwen3MoeAttention uses: config.head_dim, else hidden_size // heads. */
const headDimOf = (c: Json): number =>
  typeof c.head_dim === "number"
    ? c.head_dim
    : Math.floor(num(c, "hidden_size") / num(c, "num_attention_heads"))

/** A fixture dimension ("a*b") evaluated over a config.json. */
const dim = (c: Json, expr: string): number =>
  expr.split("*").reduce((p, f) => p * (f === "head_dim" ? headDimOf(c) : num(c, f)), 1)

/**
 * name → shape of Qwen3MoeForCausalLM(config).state_dict(), expanded from the fixture's rule
 * with config.json's values (and the class defaults for fields it leaves out).
 */
const hfStateDict = (json: Json): Map<string, number[]> => {
  const c: Json = { ...FIXTURE.config.class_fields, ...json }
  const s = FIXTURE.state_dict
  const out = new Map<string, number[]>()
  const add = (prefix: string, specs: ReadonlyArray<Spec>) => {
    for (const spec of specs)
      out.set(
        prefix + spec.name,
        spec.shape.map((e) => dim(c, e)),
      )
  }
  add("", s.before_layers)
  const mlpOnly = (c.mlp_only_layers ?? []) as number[]
  for (let layer = 0; layer < num(c, "num_hidden_layers"); layer++) {
    const p = s.layer_prefix.replace("{layer}", String(layer))
    add(p, s.attention)
    if (c.attention_bias === true) add(p, s.attention_bias)
    const sparse =
      !mlpOnly.includes(layer) &&
      num(c, "num_experts") > 0 &&
      (layer + 1) % num(c, "decoder_sparse_step") === 0
    if (sparse) {
      add(p, s.sparse_mlp)
      for (let e = 0; e < num(c, "num_experts"); e++)
        add(p + s.expert_prefix.replace("{expert}", String(e)), s.expert)
    } else add(p, s.dense_mlp)
    add(p, s.layer_norms)
  }
  add("", s.after_layers)
  // Tied: the head is the embedding's tensor, held once in a checkpoint.
  if (c.tie_word_embeddings === true)
    for (const name of Object.keys(s.tied_weights)) if (name !== "rule") out.delete(name)
  return out
}

/**
 * The value each Qwen3MoeConfig field must have for a TinyMoE config (written here from what
 * TinyMoE computes: untied head, every layer sparse, normalised top-k, no biases, no sliding
 * window), or a predicate for the fields no tensor and no computation depends on.
 */
const expectedFields = (t: TinyMoeConfig): Record<string, unknown> => ({
  vocab_size: t.vocabSize,
  hidden_size: t.dModel,
  // The dense layers' width; no tensor has it when every layer is sparse.
  intermediate_size:
    denseLayers(t).length > 0
      ? (t.denseFf ?? t.dFf * t.topK)
      : (v: unknown) => Number.isInteger(v) && (v as number) > 0,
  num_hidden_layers: t.nLayers,
  num_attention_heads: t.nHeads,
  num_key_value_heads: t.nKvHeads ?? t.nHeads,
  hidden_act: "silu",
  max_position_embeddings: t.maxSeqLen,
  initializer_range: (v: unknown) => typeof v === "number" && v > 0,
  rms_norm_eps: t.normEps,
  use_cache: (v: unknown) => typeof v === "boolean",
  tie_word_embeddings: t.tieWordEmbeddings === true,
  rope_theta: t.ropeTheta,
  rope_scaling: null,
  attention_bias: false,
  use_sliding_window: false,
  // The class stores None when use_sliding_window is false, so that is what it saves.
  sliding_window: null,
  attention_dropout: 0,
  decoder_sparse_step: t.decoderSparseStep ?? 1,
  moe_intermediate_size: t.dFf,
  num_experts_per_tok: t.topK,
  num_experts: t.nExperts,
  norm_topk_prob: true,
  output_router_logits: (v: unknown) => typeof v === "boolean",
  router_aux_loss_coef: (v: unknown) => typeof v === "number" && Number.isFinite(v),
  mlp_only_layers: t.mlpOnlyLayers ?? [],
  // Not a class field, but read by Qwen3MoeAttention when present; needed whenever
  // hidden_size / num_attention_heads is not the head width.
  head_dim: t.headDim ?? t.dModel / t.nHeads,
})

/** Layers with a dense MLP: TinyMoE's own fields, read here as Qwen3-MoE defines them. */
const denseLayers = (t: TinyMoeConfig): number[] =>
  Array.from({ length: t.nLayers }, (_, l) => l).filter(
    (l) => (t.mlpOnlyLayers ?? []).includes(l) || (l + 1) % (t.decoderSparseStep ?? 1) !== 0,
  )

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/** Everything in a checkpoint directory that is not what Hugging Face's Qwen3-MoE defines. */
const conformance = (dir: string, t: TinyMoeConfig): string[] => {
  const problems: string[] = []
  const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as Json
  for (const [field, value] of Object.entries(FIXTURE.config.saved_by_save_pretrained))
    if (!same(config[field], value))
      problems.push(
        `config.json ${field}: ${JSON.stringify(config[field])}, expected ${JSON.stringify(value)}`,
      )
  const want = expectedFields(t)
  for (const field of Object.keys(FIXTURE.config.class_fields)) {
    if (!(field in config)) {
      problems.push(`config.json ${field}: missing (a Qwen3MoeConfig field)`)
      continue
    }
    const rule = want[field]
    const ok = typeof rule === "function" ? rule(config[field]) : same(config[field], rule)
    if (!ok)
      problems.push(
        `config.json ${field}: ${JSON.stringify(config[field])}, expected ${typeof rule === "function" ? "a valid value" : JSON.stringify(rule)}`,
      )
  }
  for (const field of Object.keys(want))
    if (!(field in FIXTURE.config.class_fields) && !same(config[field], want[field]))
      problems.push(
        `config.json ${field}: ${JSON.stringify(config[field])}, expected ${JSON.stringify(want[field])}`,
      )

  const expected = hfStateDict(config)
  const index = JSON.parse(readFileSync(join(dir, "model.safetensors.index.json"), "utf8")) as {
    weight_map: Record<string, string>
  }
  const found = new Map<string, { shape: number[]; dtype: string; file: string }>()
  for (const shard of new Set(Object.values(index.weight_map))) {
    const { tensors } = decodeSafetensors(new Uint8Array(readFileSync(join(dir, shard))))
    for (const [name, tensor] of tensors) {
      if (index.weight_map[name] !== shard)
        problems.push(`${shard}: ${name} not in the index for this shard`)
      found.set(name, { shape: [...tensor.shape], dtype: tensor.dtype, file: shard })
    }
  }
  for (const [name, shape] of expected) {
    const f = found.get(name)
    if (f === undefined) problems.push(`${name}: missing from the checkpoint`)
    else {
      if (!same(f.shape, shape))
        problems.push(
          `${f.file}: ${name}: shape ${JSON.stringify(f.shape)}, expected ${JSON.stringify(shape)}`,
        )
      if (!["F32", "BF16", "F16"].includes(f.dtype))
        problems.push(`${f.file}: ${name}: dtype ${f.dtype}`)
    }
  }
  for (const name of found.keys())
    if (!expected.has(name))
      problems.push(`${found.get(name)?.file}: ${name}: not in Qwen3MoeForCausalLM's state dict`)
  for (const name of Object.keys(index.weight_map))
    if (!found.has(name)) problems.push(`model.safetensors.index.json: ${name}: in no shard`)
  // The state dict the same config yields from the TinyMoE side: config.json must not describe
  // another model than the one exported.
  const fromModel = hfStateDict({
    ...FIXTURE.config.class_fields,
    vocab_size: t.vocabSize,
    hidden_size: t.dModel,
    num_hidden_layers: t.nLayers,
    num_attention_heads: t.nHeads,
    num_key_value_heads: t.nKvHeads ?? t.nHeads,
    head_dim: t.headDim ?? t.dModel / t.nHeads,
    num_experts: t.nExperts,
    moe_intermediate_size: t.dFf,
    intermediate_size: t.denseFf ?? t.dFf * t.topK,
    mlp_only_layers: t.mlpOnlyLayers ?? [],
    decoder_sparse_step: t.decoderSparseStep ?? 1,
    tie_word_embeddings: t.tieWordEmbeddings === true,
  })
  if (!same([...fromModel], [...expected]))
    problems.push("config.json describes another state dict than the model's")

  let critic: ReadonlyMap<string, { shape: ReadonlyArray<number> }> = new Map()
  try {
    critic = decodeSafetensors(
      new Uint8Array(readFileSync(join(dir, "critic", "value_head.safetensors"))),
    ).tensors
  } catch (e) {
    problems.push(`critic/value_head.safetensors: ${String(e)}`)
  }
  if (
    !same(critic.get("value_head.weight")?.shape, [1, t.dModel]) ||
    !same(critic.get("value_head.bias")?.shape, [1]) ||
    critic.size !== 2
  )
    problems.push(
      "critic/value_head.safetensors: expected value_head.weight [1, d] and value_head.bias [1]",
    )
  return problems
}

const exportTo = (model: TinyMoe, maxShardBytes: number): string => {
  const dir = mkdtempSync(join(tmpdir(), "t1-qwen3-config-"))
  for (const f of hfCheckpointFiles(encodeWeights(model, "F32", { version: 3n }), {
    maxShardBytes,
  })) {
    const path = join(dir, f.name)
    mkdirSync(dirname(path), { recursive: true })
    writeFileSync(path, f.bytes)
  }
  return dir
}

const CONFIGS: ReadonlyArray<readonly [string, Partial<TinyMoeConfig>]> = [
  ["TinyMoE's defaults", {}],
  ["grouped-query attention, head_dim ≠ hidden / heads", { nHeads: 4, nKvHeads: 2, headDim: 8 }],
  ["tied embeddings", { tieWordEmbeddings: true }],
  [
    "dense layers (mlp_only_layers [0], decoder_sparse_step 2 over 4 layers, intermediate_size 96)",
    { nLayers: 4, mlpOnlyLayers: [0], decoderSparseStep: 2, denseFf: 96 },
  ],
]

describe("exported TinyMoE = Hugging Face's Qwen3-MoE (config fields and state dict)", () => {
  it.each(CONFIGS)(
    "%s: every Qwen3MoeConfig field, exactly Qwen3MoeForCausalLM's tensors",
    (_, over) => {
      const model = TinyMoe.create({ config: { vocabSize: 300, ...over }, seed: 3 })
      const dir = exportTo(model, 200_000)
      const shards = JSON.parse(readFileSync(join(dir, "model.safetensors.index.json"), "utf8"))
        .weight_map as Record<string, string>
      const problems = conformance(dir, model.config)
      console.log(
        `qwen3 conformance (${_}): ${Object.keys(FIXTURE.config.class_fields).length} config fields, ${hfStateDict(JSON.parse(readFileSync(join(dir, "config.json"), "utf8"))).size} tensors in ${new Set(Object.values(shards)).size} shards; problems: ${JSON.stringify(problems)}`,
      )
      expect(problems).toEqual([])
      expect(new Set(Object.values(shards)).size).toBeGreaterThan(1)
      rmSync(dir, { recursive: true, force: true })
    },
  )

  it("tells a wrong export apart: a missing field, a wrong value, a misnamed or misshapen tensor, the critic in the shards", () => {
    const model = TinyMoe.create({ config: { vocabSize: 300, nHeads: 4, nKvHeads: 2 }, seed: 4 })
    const c = model.config
    const mutate = (change: (dir: string) => void): string[] => {
      const dir = exportTo(model, 10_000_000)
      change(dir)
      const problems = conformance(dir, c)
      rmSync(dir, { recursive: true, force: true })
      return problems
    }
    const editConfig = (edit: (j: Json) => void) => (dir: string) => {
      const path = join(dir, "config.json")
      const j = JSON.parse(readFileSync(path, "utf8")) as Json
      edit(j)
      writeFileSync(path, JSON.stringify(j))
    }
    const editShard = (edit: (t: Map<string, Tensor>) => void) => (dir: string) => {
      const indexPath = join(dir, "model.safetensors.index.json")
      const index = JSON.parse(readFileSync(indexPath, "utf8")) as {
        weight_map: Record<string, string>
      }
      const shard = Object.values(index.weight_map)[0] as string
      const { tensors } = decodeSafetensors(new Uint8Array(readFileSync(join(dir, shard))))
      const copy = new Map(tensors)
      edit(copy)
      const weightMap: Record<string, string> = {}
      for (const name of copy.keys()) weightMap[name] = shard
      writeFileSync(join(dir, shard), encodeSafetensors(copy, { format: "pt" }))
      writeFileSync(indexPath, JSON.stringify({ weight_map: weightMap }))
    }
    expect(mutate(() => {})).toEqual([])
    expect(mutate(editConfig((j) => delete j.norm_topk_prob))).toContain(
      "config.json norm_topk_prob: missing (a Qwen3MoeConfig field)",
    )
    expect(mutate(editConfig((j) => (j.num_key_value_heads = 4))).join("\n")).toMatch(
      /num_key_value_heads: 4, expected 2[\s\S]*k_proj.weight: shape/,
    )
    expect(mutate(editConfig((j) => (j.tie_word_embeddings = true)))).toContain(
      "config.json tie_word_embeddings: true, expected false",
    )
    expect(mutate(editConfig((j) => (j.model_type = "qwen2_moe")))).toContain(
      'config.json model_type: "qwen2_moe", expected "qwen3_moe"',
    )
    const renamed = mutate(
      editShard((t) => {
        t.set("model.layers.0.mlp.router.weight", t.get("model.layers.0.mlp.gate.weight") as Tensor)
        t.delete("model.layers.0.mlp.gate.weight")
      }),
    )
    expect(renamed).toContain("model.layers.0.mlp.gate.weight: missing from the checkpoint")
    expect(renamed.join("\n")).toMatch(
      /model.layers.0.mlp.router.weight: not in Qwen3MoeForCausalLM/,
    )
    const transposed = mutate(
      editShard((t) => {
        // k_proj is [kv_heads · head_dim, hidden] = [32, 64]: stored [in, out] it is [64, 32].
        const k = t.get("model.layers.0.self_attn.k_proj.weight") as Tensor
        t.set("model.layers.0.self_attn.k_proj.weight", {
          ...k,
          shape: [...k.shape].reverse(),
        } as Tensor)
      }),
    )
    expect(transposed.join("\n")).toMatch(/k_proj.weight: shape \[64,32\], expected \[32,64\]/)
    expect(
      mutate(
        editShard((t) =>
          t.set("value_head.bias", { dtype: "F32", shape: [1], data: new Float32Array(1) }),
        ),
      ).join("\n"),
    ).toMatch(/value_head.bias: not in Qwen3MoeForCausalLM's state dict/)
  })
})
