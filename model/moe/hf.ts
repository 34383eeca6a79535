import type { Floats } from "../kernels/kernels.ts"
import { CRITIC_TENSORS } from "../weights/hf-checkpoint.ts"
import {
  denseWidth,
  headDim,
  isMoeLayer,
  kvHeads,
  kvWidth,
  ModelConfigError,
  queryWidth,
  type TinyMoeConfig,
  validateConfig,
} from "./config.ts"
import { allocFloats, buildParams, type Params, type Precision } from "./params.ts"

/**
 * TinyMoE as Hugging Face's Qwen3-MoE (`transformers/models/qwen3_moe`): the config.json an
 * engine reads, the tensor names and [out, in] layouts `Qwen3MoeForCausalLM.state_dict()` has,
 * and the moves between those and t1's [in, out] parameter arrays. The critic (value head) is
 * not part of Qwen3-MoE: it travels in a file of its own (`CRITIC_TENSORS`).
 */

export const HF_MODEL_TYPE = "qwen3_moe"
export const HF_ARCHITECTURE = "Qwen3MoeForCausalLM"

export { CRITIC_TENSORS } from "../weights/hf-checkpoint.ts"

/** Token ids config.json names (from the tokenizer an export ships with). */
export interface HfSpecialTokens {
  readonly bosTokenId?: number | null
  readonly eosTokenId?: number | ReadonlyArray<number> | null
  readonly padTokenId?: number | null
}

/** What the router's load-balancing coefficient defaults to in Qwen3MoeConfig. */
const HF_ROUTER_AUX_LOSS_COEF = 0.001

/**
 * config.json of a TinyMoE as `Qwen3MoeConfig` defines it: every field of the class (both the
 * `rope_theta`/`rope_scaling` spelling of transformers 4.x and the `rope_parameters` of 5.x, so
 * either reads it) plus `head_dim`, which Qwen3-MoE's attention reads when present.
 */
export const toHfConfig = (
  c: TinyMoeConfig,
  tokens: HfSpecialTokens = {},
  dtype: "float32" | "bfloat16" | "float16" = "float32",
): Record<string, unknown> => ({
  architectures: [HF_ARCHITECTURE],
  model_type: HF_MODEL_TYPE,
  vocab_size: c.vocabSize,
  hidden_size: c.dModel,
  intermediate_size: denseWidth(c),
  num_hidden_layers: c.nLayers,
  num_attention_heads: c.nHeads,
  num_key_value_heads: kvHeads(c),
  head_dim: headDim(c),
  hidden_act: "silu",
  max_position_embeddings: c.maxSeqLen,
  initializer_range: 0.02,
  rms_norm_eps: c.normEps,
  use_cache: true,
  tie_word_embeddings: c.tieWordEmbeddings === true,
  rope_theta: c.ropeTheta,
  rope_scaling: null,
  rope_parameters: { rope_type: "default", rope_theta: c.ropeTheta },
  attention_bias: false,
  use_sliding_window: false,
  sliding_window: null,
  max_window_layers: c.nLayers,
  attention_dropout: 0,
  decoder_sparse_step: c.decoderSparseStep ?? 1,
  moe_intermediate_size: c.dFf,
  num_experts_per_tok: c.topK,
  num_experts: c.nExperts,
  norm_topk_prob: true,
  output_router_logits: false,
  router_aux_loss_coef: HF_ROUTER_AUX_LOSS_COEF,
  mlp_only_layers: [...(c.mlpOnlyLayers ?? [])],
  pad_token_id: tokens.padTokenId ?? null,
  bos_token_id: tokens.bosTokenId ?? null,
  eos_token_id: tokens.eosTokenId ?? null,
  torch_dtype: dtype,
  dtype,
})

const refuse = (field: string, message: string): never => {
  throw new ModelConfigError({ field, message: `config.json ${field}: ${message}` })
}

const intField = (json: Record<string, unknown>, field: string, fallback?: number): number => {
  const v = json[field] ?? fallback
  if (typeof v !== "number" || !Number.isInteger(v) || v <= 0)
    return refuse(field, `expected a positive integer, got ${JSON.stringify(v)}`)
  return v
}

const numberField = (json: Record<string, unknown>, field: string, fallback: number): number => {
  const v = json[field] ?? fallback
  if (typeof v !== "number" || !Number.isFinite(v))
    return refuse(field, `expected a number, got ${JSON.stringify(v)}`)
  return v
}

const ropeTheta = (json: Record<string, unknown>): number => {
  const params = json.rope_parameters
  if (params !== undefined && params !== null) {
    if (typeof params !== "object") return refuse("rope_parameters", "expected an object")
    const p = params as Record<string, unknown>
    if (p.rope_type !== undefined && p.rope_type !== "default")
      return refuse("rope_parameters.rope_type", `only "default" RoPE, got ${String(p.rope_type)}`)
    if (p.rope_theta !== undefined) return numberField(p, "rope_theta", 10_000)
  }
  if (json.rope_scaling !== undefined && json.rope_scaling !== null)
    return refuse("rope_scaling", "RoPE scaling is not supported (expected null)")
  return numberField(json, "rope_theta", 10_000)
}

/**
 * The TinyMoE a Qwen3-MoE config.json describes. Fields whose other values would change the math
 * in ways t1's model does not compute (sliding windows,
 * attention biases, un-normalised top-k gates, another activation) are refused by name rather
 * than ignored.
 */
export const fromHfConfig = (value: unknown): TinyMoeConfig => {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return refuse("(root)", "expected a JSON object")
  const json = value as Record<string, unknown>
  if (json.model_type !== HF_MODEL_TYPE)
    refuse("model_type", `expected "${HF_MODEL_TYPE}", got ${JSON.stringify(json.model_type)}`)
  const arch = json.architectures
  if (arch !== undefined && !(Array.isArray(arch) && arch.includes(HF_ARCHITECTURE)))
    refuse("architectures", `expected ["${HF_ARCHITECTURE}"], got ${JSON.stringify(arch)}`)
  const unsupported: ReadonlyArray<readonly [string, unknown, string]> = [
    ["hidden_act", "silu", "only silu"],
    ["attention_bias", false, "attention biases are not supported"],
    ["use_sliding_window", false, "sliding-window attention is not supported"],
    ["norm_topk_prob", true, "only normalised top-k gates (norm_topk_prob: true)"],
  ]
  for (const [field, expected, why] of unsupported) {
    const v = json[field]
    if (v !== undefined && v !== expected) refuse(field, `${why}; got ${JSON.stringify(v)}`)
  }
  if (json.tie_word_embeddings !== undefined && typeof json.tie_word_embeddings !== "boolean")
    refuse(
      "tie_word_embeddings",
      `expected true or false, got ${JSON.stringify(json.tie_word_embeddings)}`,
    )
  // Qwen3MoeConfig's own default for norm_topk_prob is false: absent means false.
  if (json.norm_topk_prob === undefined)
    refuse("norm_topk_prob", "absent (Qwen3MoeConfig's default, false); only true is supported")
  const mlpOnly = json.mlp_only_layers ?? []
  if (
    !(Array.isArray(mlpOnly) && mlpOnly.every((l) => typeof l === "number" && Number.isInteger(l)))
  )
    refuse("mlp_only_layers", `expected a list of layer indices, got ${JSON.stringify(mlpOnly)}`)
  const sparseStep = intField(json, "decoder_sparse_step", 1)
  const dModel = intField(json, "hidden_size")
  const nHeads = intField(json, "num_attention_heads")
  // Absent, Qwen3MoeConfig's own default (4) applies, as it does for transformers and engines.
  const nKvHeads = intField(json, "num_key_value_heads", 4)
  const hd = intField(json, "head_dim", Math.floor(dModel / nHeads))
  // Left implicit when they are the defaults, so a config read back equals the one written.
  const config: TinyMoeConfig = {
    vocabSize: intField(json, "vocab_size"),
    dModel,
    nLayers: intField(json, "num_hidden_layers"),
    nHeads,
    ...(nKvHeads === nHeads ? {} : { nKvHeads }),
    ...(hd * nHeads === dModel ? {} : { headDim: hd }),
    ...(json.tie_word_embeddings === true ? { tieWordEmbeddings: true } : {}),
    ...((mlpOnly as number[]).length > 0 ? { mlpOnlyLayers: [...(mlpOnly as number[])] } : {}),
    ...(sparseStep === 1 ? {} : { decoderSparseStep: sparseStep }),
    nExperts: intField(json, "num_experts"),
    topK: intField(json, "num_experts_per_tok"),
    dFf: intField(json, "moe_intermediate_size"),
    maxSeqLen: intField(json, "max_position_embeddings"),
    ropeTheta: ropeTheta(json),
    normEps: numberField(json, "rms_norm_eps", 1e-6),
  }
  const dense = intField(json, "intermediate_size", config.dFf * config.topK)
  const withDense: TinyMoeConfig =
    dense === config.dFf * config.topK ? config : { ...config, denseFf: dense }
  const error = validateConfig(withDense)
  if (error) refuse(error.field, error.message)
  return withDense
}

/** One tensor of the Hugging Face state dict. */
export interface HfTensorSpec {
  readonly name: string
  readonly shape: ReadonlyArray<number>
}

/**
 * The names and shapes of `Qwen3MoeForCausalLM(config).state_dict()` for a TinyMoE config
 * (per-expert `mlp.experts.<e>.{gate,up,down}_proj`, as checkpoints are published and as SGLang
 * and vLLM load them), in the order the model declares them.
 */
export function* hfTensorSpecs(c: TinyMoeConfig): Generator<HfTensorSpec> {
  const d = c.dModel
  const hd = headDim(c)
  yield { name: "model.embed_tokens.weight", shape: [c.vocabSize, d] }
  for (let l = 0; l < c.nLayers; l++) {
    const p = `model.layers.${l}`
    yield { name: `${p}.self_attn.q_proj.weight`, shape: [queryWidth(c), d] }
    yield { name: `${p}.self_attn.k_proj.weight`, shape: [kvWidth(c), d] }
    yield { name: `${p}.self_attn.v_proj.weight`, shape: [kvWidth(c), d] }
    yield { name: `${p}.self_attn.o_proj.weight`, shape: [d, queryWidth(c)] }
    yield { name: `${p}.self_attn.q_norm.weight`, shape: [hd] }
    yield { name: `${p}.self_attn.k_norm.weight`, shape: [hd] }
    if (isMoeLayer(c, l)) {
      yield { name: `${p}.mlp.gate.weight`, shape: [c.nExperts, d] }
      for (let e = 0; e < c.nExperts; e++) {
        yield { name: `${p}.mlp.experts.${e}.gate_proj.weight`, shape: [c.dFf, d] }
        yield { name: `${p}.mlp.experts.${e}.up_proj.weight`, shape: [c.dFf, d] }
        yield { name: `${p}.mlp.experts.${e}.down_proj.weight`, shape: [d, c.dFf] }
      }
    } else {
      // Qwen3MoeMLP: a dense SwiGLU of width intermediate_size.
      const w = denseWidth(c)
      yield { name: `${p}.mlp.gate_proj.weight`, shape: [w, d] }
      yield { name: `${p}.mlp.up_proj.weight`, shape: [w, d] }
      yield { name: `${p}.mlp.down_proj.weight`, shape: [d, w] }
    }
    yield { name: `${p}.input_layernorm.weight`, shape: [d] }
    yield { name: `${p}.post_attention_layernorm.weight`, shape: [d] }
  }
  yield { name: "model.norm.weight", shape: [d] }
  // Tied: the output layer is model.embed_tokens.weight, and checkpoints (save_pretrained, and
  // what SGLang and vLLM load) carry no lm_head.weight.
  if (!c.tieWordEmbeddings) yield { name: "lm_head.weight", shape: [c.vocabSize, d] }
}

/** The critic's tensors: a linear value head on the final normalised state. */
export const criticTensorSpecs = (c: TinyMoeConfig): HfTensorSpec[] => [
  { name: CRITIC_TENSORS.weight, shape: [1, c.dModel] },
  { name: CRITIC_TENSORS.bias, shape: [1] },
]

/** `src` [rows, cols] transposed into `dst` [cols, rows]. */
const transposeInto = (src: ArrayLike<number>, rows: number, cols: number, dst: Floats): void => {
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++) dst[c * rows + r] = src[r * cols + c] as number
}

const precisionOf = (p: Params): Precision => (p.embed instanceof Float64Array ? "f64" : "f32")

/** An HF tensor with its values (the parameters' precision). */
export interface HfTensor extends HfTensorSpec {
  readonly data: Floats
}

/**
 * The policy's tensors under Hugging Face names and layouts (copies in the parameters'
 * precision; matrices transposed to [out, in]), in `hfTensorSpecs` order.
 */
export const toHfTensors = (c: TinyMoeConfig, p: Params): HfTensor[] => {
  const d = c.dModel
  const F = c.dFf
  const precision = precisionOf(p)
  const copy = (src: Floats): Floats => src.slice()
  const transposed = (src: Floats, rows: number, cols: number): Floats => {
    const out = allocFloats(precision, rows * cols)
    transposeInto(src, rows, cols, out)
    return out
  }
  const out: HfTensor[] = []
  const take = (spec: HfTensorSpec, data: Floats) => out.push({ ...spec, data })
  for (const spec of hfTensorSpecs(c)) {
    const parts = spec.name.split(".")
    if (spec.name === "model.embed_tokens.weight") take(spec, copy(p.embed))
    else if (spec.name === "model.norm.weight") take(spec, copy(p.finalNorm))
    else if (spec.name === "lm_head.weight") take(spec, transposed(p.lmHead, d, c.vocabSize))
    else {
      const lp = p.layers[Number(parts[2])] as Params["layers"][number]
      const rest = parts.slice(3, -1).join(".")
      const [outDim, inDim] = spec.shape as [number, number]
      switch (rest) {
        case "self_attn.q_proj":
          take(spec, transposed(lp.wq, inDim, outDim))
          break
        case "self_attn.k_proj":
          take(spec, transposed(lp.wk, inDim, outDim))
          break
        case "self_attn.v_proj":
          take(spec, transposed(lp.wv, inDim, outDim))
          break
        case "self_attn.o_proj":
          take(spec, transposed(lp.wo, inDim, outDim))
          break
        case "self_attn.q_norm":
          take(spec, copy(lp.qNorm))
          break
        case "self_attn.k_norm":
          take(spec, copy(lp.kNorm))
          break
        case "mlp.gate":
          take(spec, transposed(lp.router, d, c.nExperts))
          break
        case "input_layernorm":
          take(spec, copy(lp.attnNorm))
          break
        case "post_attention_layernorm":
          take(spec, copy(lp.ffnNorm))
          break
        default: {
          // mlp.experts.<e>.<proj> of a sparse layer, or mlp.<proj> of a dense one (expert 0).
          const dense = parts[4] !== "experts"
          const e = dense ? 0 : Number(parts[5])
          const which = dense ? parts[4] : parts[6]
          const Fl = dense ? denseWidth(c) : F
          if (which === "down_proj")
            take(spec, transposed(lp.wDown.subarray(e * Fl * d, (e + 1) * Fl * d), Fl, d))
          else {
            const w = which === "gate_proj" ? lp.wGate : lp.wUp
            take(spec, transposed(w.subarray(e * d * Fl, (e + 1) * d * Fl), d, Fl))
          }
        }
      }
    }
  }
  return out
}

/**
 * Parameters from Hugging Face tensors (already checked against `hfTensorSpecs`: `get` returns
 * each spec's values, row-major in its HF shape) and the critic's, or a zero critic when the
 * checkpoint has none (an engine checkpoint from another trainer).
 */
export const fromHfTensors = (
  c: TinyMoeConfig,
  get: (name: string) => ArrayLike<number>,
  critic: { weight: ArrayLike<number>; bias: ArrayLike<number> } | undefined,
  precision: Precision,
): Params => {
  const d = c.dModel
  const F = c.dFf
  const p = buildParams(c, precision)
  p.embed.set(get("model.embed_tokens.weight"))
  p.finalNorm.set(get("model.norm.weight"))
  if (!c.tieWordEmbeddings) transposeInto(get("lm_head.weight"), c.vocabSize, d, p.lmHead)
  p.layers.forEach((lp, l) => {
    const n = (s: string) => get(`model.layers.${l}.${s}.weight`)
    transposeInto(n("self_attn.q_proj"), queryWidth(c), d, lp.wq)
    transposeInto(n("self_attn.k_proj"), kvWidth(c), d, lp.wk)
    transposeInto(n("self_attn.v_proj"), kvWidth(c), d, lp.wv)
    transposeInto(n("self_attn.o_proj"), d, queryWidth(c), lp.wo)
    lp.qNorm.set(n("self_attn.q_norm"))
    lp.kNorm.set(n("self_attn.k_norm"))
    if (isMoeLayer(c, l)) {
      transposeInto(n("mlp.gate"), c.nExperts, d, lp.router)
      for (let e = 0; e < c.nExperts; e++) {
        transposeInto(n(`mlp.experts.${e}.gate_proj`), F, d, lp.wGate.subarray(e * d * F))
        transposeInto(n(`mlp.experts.${e}.up_proj`), F, d, lp.wUp.subarray(e * d * F))
        transposeInto(n(`mlp.experts.${e}.down_proj`), d, F, lp.wDown.subarray(e * F * d))
      }
    } else {
      const w = denseWidth(c)
      transposeInto(n("mlp.gate_proj"), w, d, lp.wGate)
      transposeInto(n("mlp.up_proj"), w, d, lp.wUp)
      transposeInto(n("mlp.down_proj"), d, w, lp.wDown)
    }
    lp.attnNorm.set(n("input_layernorm"))
    lp.ffnNorm.set(n("post_attention_layernorm"))
  })
  if (critic) {
    p.valueHead.set(critic.weight)
    p.valueBias.set(critic.bias)
  }
  return p
}
