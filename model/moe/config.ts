import { Data } from "effect"

/** Shape of a TinyMoE decoder. Every layer has a Mixture-of-Experts feed-forward. */
export interface TinyMoeConfig {
  readonly vocabSize: number
  readonly dModel: number
  readonly nLayers: number
  readonly nHeads: number
  /** Experts per MoE layer (E). */
  readonly nExperts: number
  /** Experts each token uses per layer (k ≤ E). */
  readonly topK: number
  /** Hidden width of each expert. */
  readonly dFf: number
  /** Longest sequence a KV cache holds (prompt plus generation). */
  readonly maxSeqLen: number
  readonly ropeTheta: number
  readonly normEps: number
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
  if (config.dModel % config.nHeads !== 0 || (config.dModel / config.nHeads) % 2 !== 0) {
    return new ModelConfigError({
      field: "nHeads",
      message: `nHeads: dModel ${config.dModel} must split into ${config.nHeads} heads of even width (RoPE rotates pairs)`,
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

export const headDim = (config: TinyMoeConfig): number => config.dModel / config.nHeads
