import type { Floats, Kernels } from "../kernels/kernels.ts"
import {
  decodeSafetensors,
  encodeSafetensors,
  SafetensorsError,
  type Tensor,
} from "../weights/index.ts"
import { denseWidth, headDim, kvHeads, ModelConfigError, type TinyMoeConfig } from "./config.ts"
import {
  CRITIC_TENSORS,
  criticTensorSpecs,
  fromHfConfig,
  fromHfTensors,
  hfTensorSpecs,
  toHfConfig,
  toHfTensors,
} from "./hf.ts"
import { TinyMoe } from "./model.ts"
import type { Precision } from "./params.ts"

/**
 * t1's one-file weights: a safetensors file whose tensors are the Hugging Face Qwen3-MoE state
 * dict (names and [out, in] layouts, `hfTensorSpecs`) plus the critic's two tensors, with the
 * model's config.json in the header's `config` and t1's marker and policy version beside it. Its
 * `format` is "pt", as Hugging Face's loaders require.
 */
export const WEIGHTS_FORMAT = "t1-tinymoe"

export type StoredDtype = "F32" | "BF16" | "F64"

/** Metadata carried in the safetensors header next to the weights. */
export interface WeightsMetadata {
  readonly version?: bigint
  readonly extra?: Readonly<Record<string, string>>
}

const tensorOf = (data: Floats, shape: ReadonlyArray<number>, dtype: StoredDtype): Tensor => {
  if (dtype === "F64")
    return { dtype, shape, data: data instanceof Float64Array ? data : Float64Array.from(data) }
  const f32 = data instanceof Float32Array ? data : Float32Array.from(data)
  return { dtype, shape, data: f32 }
}

/** The model's weights as safetensors bytes, with the config and policy version in the header. */
export const encodeWeights = (
  model: TinyMoe,
  dtype: StoredDtype = "F32",
  metadata: WeightsMetadata = {},
): Uint8Array => {
  const tensors = new Map<string, Tensor>()
  for (const t of toHfTensors(model.config, model.params))
    tensors.set(t.name, tensorOf(t.data, t.shape, dtype))
  tensors.set(
    CRITIC_TENSORS.weight,
    tensorOf(model.params.valueHead, [1, model.config.dModel], dtype),
  )
  tensors.set(CRITIC_TENSORS.bias, tensorOf(model.params.valueBias, [1], dtype))
  return encodeSafetensors(tensors, {
    ...metadata.extra,
    format: "pt",
    t1: WEIGHTS_FORMAT,
    config: JSON.stringify(toHfConfig(model.config)),
    ...(metadata.version !== undefined ? { version: metadata.version.toString() } : {}),
  })
}

export interface DecodedWeights {
  readonly model: TinyMoe
  readonly version: bigint | undefined
  readonly metadata: Record<string, string>
  /** Whether the file held the critic's tensors (an engine checkpoint from elsewhere has none). */
  readonly critic: boolean
}

export interface DecodeOptions {
  /**
   * The config the weights must have (a job's model): the file's names and shapes are checked
   * against it, and a config in the file's header must describe the same model. Without it the
   * header's config is the model's.
   */
  readonly config?: TinyMoeConfig
  /** Where the tensors came from, for error messages. */
  readonly path?: string
}

const fail = (field: string, reason: string, path?: string): never => {
  throw new SafetensorsError({ field, reason, ...(path === undefined ? {} : { path }) })
}

/** Longest context a weights file may declare (the default is 8192): RoPE tables have that many rows. */
export const MAX_SEQ_LEN = 1 << 20

const parseConfig = (text: string | undefined, path?: string): TinyMoeConfig | undefined => {
  if (text === undefined) return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return fail("__metadata__.config", "is not JSON", path)
  }
  try {
    return fromHfConfig(parsed)
  } catch (e) {
    if (e instanceof ModelConfigError) return fail(`__metadata__.config`, e.message, path)
    throw e
  }
}

/** The fields two configs must share to be the same model (maxSeqLen aside: a serving limit). */
const SHAPE_FIELDS = [
  "vocabSize",
  "dModel",
  "nLayers",
  "nHeads",
  "nExperts",
  "topK",
  "dFf",
] as const satisfies ReadonlyArray<keyof TinyMoeConfig>

/** Differences between two configs that change the model, as "field: a ≠ b". */
export const configMismatch = (expected: TinyMoeConfig, got: TinyMoeConfig): string[] => {
  const out: string[] = []
  for (const f of SHAPE_FIELDS)
    if (expected[f] !== got[f]) out.push(`${f}: ${got[f]}, expected ${expected[f]}`)
  const pairs: ReadonlyArray<readonly [string, number, number]> = [
    ["nKvHeads", kvHeads(expected), kvHeads(got)],
    ["headDim", headDim(expected), headDim(got)],
    ["ropeTheta", expected.ropeTheta, got.ropeTheta],
    ["normEps", expected.normEps, got.normEps],
    ["tieWordEmbeddings", expected.tieWordEmbeddings ? 1 : 0, got.tieWordEmbeddings ? 1 : 0],
    ["decoderSparseStep", expected.decoderSparseStep ?? 1, got.decoderSparseStep ?? 1],
    ["denseFf", denseWidth(expected), denseWidth(got)],
  ]
  const layers = (c: TinyMoeConfig) => [...(c.mlpOnlyLayers ?? [])].sort((a, b) => a - b).join(",")
  if (layers(expected) !== layers(got))
    out.push(`mlpOnlyLayers: [${layers(got)}], expected [${layers(expected)}]`)
  for (const [f, e, g] of pairs) if (e !== g) out.push(`${f}: ${g}, expected ${e}`)
  return out
}

const FLOAT_DTYPES = new Set(["F32", "BF16", "F64", "F16"])

/**
 * Checks a tensor against its expected shape: a float dtype, the exact shape, finite values.
 * `where` names the file the tensor came from.
 */
export const checkTensor = (
  name: string,
  tensor: Tensor | undefined,
  shape: ReadonlyArray<number>,
  where?: string,
): Float32Array | Float64Array => {
  if (!tensor) return fail(name, "missing", where)
  if (!FLOAT_DTYPES.has(tensor.dtype))
    return fail(name, `dtype ${tensor.dtype} is not a float type (F32, BF16, F16, F64)`, where)
  if (tensor.shape.length !== shape.length || tensor.shape.some((n, i) => n !== shape[i]))
    return fail(name, `shape [${tensor.shape.join(", ")}], expected [${shape.join(", ")}]`, where)
  const data = tensor.data as Float32Array | Float64Array
  for (let i = 0; i < data.length; i++) {
    const v = data[i] as number
    if (v - v !== 0) return fail(name, `value ${v} at flat index ${i} is not finite`, where)
  }
  return data
}

/**
 * A model from tensors under Hugging Face names (checked: every policy tensor present, float,
 * the config's shape, finite; the critic's two tensors optional but complete; nothing else).
 * `where(name)` names the file a tensor came from, for errors.
 */
export const modelFromTensors = (
  config: TinyMoeConfig,
  tensors: ReadonlyMap<string, Tensor>,
  precision: Precision,
  kernels: Kernels | undefined,
  where: (name: string) => string | undefined = () => undefined,
): { model: TinyMoe; critic: boolean } => {
  // Every tensor is checked before anything is allocated: the config could ask for more memory
  // than exists, and only the tensors bound it.
  const checked = new Map<string, Float32Array | Float64Array>()
  for (const { name, shape } of hfTensorSpecs(config))
    checked.set(name, checkTensor(name, tensors.get(name), shape, where(name)))
  const criticNames = criticTensorSpecs(config)
  const present = criticNames.filter((s) => tensors.has(s.name))
  if (present.length === 1) {
    const absent = criticNames.find((s) => !tensors.has(s.name))?.name ?? ""
    fail(absent, "missing (the critic's tensors come together)", where(absent))
  }
  for (const { name, shape } of present)
    checked.set(name, checkTensor(name, tensors.get(name), shape, where(name)))
  for (const name of tensors.keys())
    if (!checked.has(name))
      fail(name, "is not a tensor of this Qwen3-MoE config (nor the critic's)", where(name))
  const get = (name: string) => checked.get(name) as Float32Array | Float64Array
  const critic =
    present.length === 2
      ? { weight: get(CRITIC_TENSORS.weight), bias: get(CRITIC_TENSORS.bias) }
      : undefined
  const params = fromHfTensors(config, get, critic, precision)
  return {
    model: TinyMoe.fromParams(config, params, precision, kernels),
    critic: critic !== undefined,
  }
}

/** Bounds a config no tensor bounds (RoPE tables have maxSeqLen rows). */
export const checkSeqLen = (config: TinyMoeConfig, field: string, path?: string): void => {
  if (config.maxSeqLen > MAX_SEQ_LEN)
    fail(field, `at most ${MAX_SEQ_LEN}, got ${config.maxSeqLen}`, path)
}

/**
 * Loads weights written by `encodeWeights` (any stored dtype), or any safetensors file of
 * Qwen3-MoE tensors when `options.config` says which model, into a model computing at
 * `precision`. Every policy tensor must be present with its exact shape and finite values;
 * extra tensors are refused.
 */
export const decodeWeights = (
  bytes: Uint8Array,
  precision: Precision = "f32",
  kernels?: Kernels,
  options: DecodeOptions = {},
): DecodedWeights => {
  const { tensors, metadata } = decodeSafetensors(bytes)
  const path = options.path
  const header = parseConfig(metadata.config, path)
  const config =
    options.config ??
    header ??
    fail(
      "__metadata__.config",
      "missing: not a t1 checkpoint (a Hugging Face file needs the model's config.json beside it)",
      path,
    )
  if (options.config && header) {
    const diff = configMismatch(options.config, header)
    if (diff.length > 0) fail("__metadata__.config", `another model: ${diff.join("; ")}`, path)
  }
  checkSeqLen(config, "__metadata__.config.max_position_embeddings", path)
  const { model, critic } = modelFromTensors(config, tensors, precision, kernels, () => path)
  let version: bigint | undefined
  if (metadata.version !== undefined) {
    if (!/^\d+$/.test(metadata.version))
      fail("__metadata__.version", `not a non-negative integer: ${metadata.version}`, path)
    version = BigInt(metadata.version)
  }
  return { model, version, metadata, critic }
}
