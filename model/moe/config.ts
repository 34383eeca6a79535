import { Data } from "effect"

/** Shape of a TinyMoE decoder. Every layer has a Mixture-of-Experts feed-forward. */
export interface TinyMoeConfig {
  readonly vocabSize: number
  readonly dModel: number
  readonly nLayers: number
  readonly nHeads: number
  /**
   * Key/value heads (grouped-query attention: each serves nHeads / nKvHeads query heads).
   * Default nHeads.
   */
  readonly nKvHeads?: number
  /** Width of one attention head. Default dModel / nHeads. */
  readonly headDim?: number
  /** Experts per MoE layer (E). */
  readonly nExperts: number
  /** Experts each token uses per layer (k ≤ E). */
  readonly topK: number
  /** Hidden width of each expert (SwiGLU: gate and up projections to dFf, down back to dModel). */
  readonly dFf: number
  /** Longest sequence a KV cache holds (prompt plus generation). */
  readonly maxSeqLen: number
  readonly ropeTheta: number
  readonly normEps: number
  /** The output layer is the embedding (logits = f · embedᵀ): Qwen3's tie_word_embeddings. */
  readonly tieWordEmbeddings?: boolean
  /**
   * Layers with a dense SwiGLU MLP instead of experts (Qwen3's mlp_only_layers). With
   * decoderSparseStep s, layer l is sparse only when (l + 1) % s == 0, as in Qwen3-MoE.
   */
  readonly mlpOnlyLayers?: ReadonlyArray<number>
  readonly decoderSparseStep?: number
  /** Hidden width of a dense MLP layer (Qwen3's intermediate_size). Default dFf · topK. */
  readonly denseFf?: number
}

/**
 * Small enough that warm start, RL and evaluation of the embedded default fit two CPU cores:
 * about 0.3 M parameters with a 1024-token vocabulary.
 */
export const DEFAULT_CONFIG: TinyMoeConfig = {
  vocabSize: 1024,
  dModel: 64,
  nLayers: 2,
  nHeads: 4,
  nExperts: 4,
  topK: 2,
  dFf: 128,
  maxSeqLen: 8192,
  ropeTheta: 10_000,
  normEps: 1e-5,
}

export class ModelConfigError extends Data.TaggedError("ModelConfigError")<{
  readonly field: string
  readonly message: string
}> {}

const positiveInt = (field: keyof TinyMoeConfig, value: number): ModelConfigError | undefined =>
  Number.isInteger(value) && value > 0
    ? undefined
    : new ModelConfigError({
        field,
        message: `${field}: expected a positive integer, got ${value}`,
      })

/** Returns the first problem with a config, or undefined when it is usable. */
export const validateConfig = (config: TinyMoeConfig): ModelConfigError | undefined => {
  for (const field of [
    "vocabSize",
    "dModel",
    "nLayers",
    "nHeads",
    "nExperts",
    "topK",
    "dFf",
    "maxSeqLen",
  ] as const) {
    const error = positiveInt(field, config[field])
    if (error) return error
  }
  if (config.headDim === undefined && config.dModel % config.nHeads !== 0) {
    return new ModelConfigError({
      field: "nHeads",
      message: `nHeads: dModel ${config.dModel} does not split into ${config.nHeads} heads (give headDim)`,
    })
  }
  const hd = headDim(config)
  if (!(Number.isInteger(hd) && hd > 0 && hd % 2 === 0)) {
    return new ModelConfigError({
      field: "headDim",
      message: `headDim: expected a positive even integer (RoPE rotates pairs), got ${hd}`,
    })
  }
  const step = config.decoderSparseStep ?? 1
  if (!(Number.isInteger(step) && step > 0))
    return new ModelConfigError({
      field: "decoderSparseStep",
      message: `decoderSparseStep: expected a positive integer, got ${step}`,
    })
  for (const l of config.mlpOnlyLayers ?? [])
    if (!(Number.isInteger(l) && l >= 0 && l < config.nLayers))
      return new ModelConfigError({
        field: "mlpOnlyLayers",
        message: `mlpOnlyLayers: ${l} is not a layer of ${config.nLayers}`,
      })
  const dense = denseWidth(config)
  if (!(Number.isInteger(dense) && dense > 0))
    return new ModelConfigError({
      field: "denseFf",
      message: `denseFf: expected a positive integer, got ${dense}`,
    })
  const kv = kvHeads(config)
  if (!(Number.isInteger(kv) && kv > 0 && config.nHeads % kv === 0)) {
    return new ModelConfigError({
      field: "nKvHeads",
      message: `nKvHeads: ${kv} must be a positive integer dividing nHeads ${config.nHeads}`,
    })
  }
  if (config.topK > config.nExperts) {
    return new ModelConfigError({
      field: "topK",
      message: `topK: ${config.topK} exceeds nExperts ${config.nExperts}`,
    })
  }
  if (config.nExperts > 65_536) {
    return new ModelConfigError({
      field: "nExperts",
      message: `nExperts: at most 65536 (routing travels as uint16), got ${config.nExperts}`,
    })
  }
  if (!(config.ropeTheta > 1) || !(config.normEps > 0)) {
    return new ModelConfigError({
      field: config.ropeTheta > 1 ? "normEps" : "ropeTheta",
      message: "ropeTheta must be > 1 and normEps > 0",
    })
  }
  return undefined
}

export const headDim = (config: TinyMoeConfig): number =>
  config.headDim ?? config.dModel / config.nHeads

export const kvHeads = (config: TinyMoeConfig): number => config.nKvHeads ?? config.nHeads

/** Width of the queries (and of the attention output): nHeads · headDim. */
export const queryWidth = (config: TinyMoeConfig): number => config.nHeads * headDim(config)

/** Width of the keys and values: nKvHeads · headDim. */
export const kvWidth = (config: TinyMoeConfig): number => kvHeads(config) * headDim(config)

/** Whether layer l has experts (else a dense MLP): Qwen3-MoE's rule. */
export const isMoeLayer = (config: TinyMoeConfig, l: number): boolean =>
  !(config.mlpOnlyLayers ?? []).includes(l) && (l + 1) % (config.decoderSparseStep ?? 1) === 0

export const denseWidth = (config: TinyMoeConfig): number =>
  config.denseFf ?? config.dFf * config.topK

/**
 * A layer's feed-forward as experts: a dense MLP is one expert of width denseFf that every row
 * uses with gate 1 (and no router).
 */
export const layerFfn = (
  config: TinyMoeConfig,
  l: number,
): {
  readonly experts: number
  readonly topK: number
  readonly width: number
  readonly moe: boolean
} =>
  isMoeLayer(config, l)
    ? { experts: config.nExperts, topK: config.topK, width: config.dFf, moe: true }
    : { experts: 1, topK: 1, width: denseWidth(config), moe: false }
