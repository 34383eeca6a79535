import type { Floats, Kernels } from "../kernels/kernels.ts"
import {
  decodeSafetensors,
  encodeSafetensors,
  SafetensorsError,
  type Tensor,
} from "../weights/index.ts"
import { DEFAULT_CONFIG, type TinyMoeConfig, validateConfig } from "./config.ts"
import { TinyMoe } from "./model.ts"
import { buildParams, type Precision, paramShapes } from "./params.ts"

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
  for (const entry of model.entries())
    tensors.set(entry.name, tensorOf(entry.data, entry.shape, dtype))
  return encodeSafetensors(tensors, {
    ...metadata.extra,
    format: WEIGHTS_FORMAT,
    config: JSON.stringify(model.config),
    ...(metadata.version !== undefined ? { version: metadata.version.toString() } : {}),
  })
}

export interface DecodedWeights {
  readonly model: TinyMoe
  readonly version: bigint | undefined
  readonly metadata: Record<string, string>
}

const fail = (field: string, reason: string): never => {
  throw new SafetensorsError({ field, reason })
}

/** Longest context a weights file may declare (the default is 8192): RoPE tables have that many rows. */
export const MAX_SEQ_LEN = 1 << 20

const parseConfig = (text: string | undefined): TinyMoeConfig => {
  if (text === undefined) return fail("__metadata__.config", "missing: not a t1 TinyMoE checkpoint")
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return fail("__metadata__.config", "is not JSON")
  }
  if (typeof parsed !== "object" || parsed === null)
    return fail("__metadata__.config", "is not an object")
  const config = { ...DEFAULT_CONFIG, ...(parsed as Partial<TinyMoeConfig>) }
  const error = validateConfig(config)
  if (error) return fail(`__metadata__.config.${error.field}`, error.message)
  // No tensor in the file bounds maxSeqLen, so a bound of its own.
  if (config.maxSeqLen > MAX_SEQ_LEN)
    return fail("__metadata__.config.maxSeqLen", `at most ${MAX_SEQ_LEN}, got ${config.maxSeqLen}`)
  return config
}

/**
 * Loads weights written by `encodeWeights` (any stored dtype) into a model computing at
 * `precision`. Every tensor must be present with its exact shape; extra tensors are refused.
 */
export const decodeWeights = (
  bytes: Uint8Array,
  precision: Precision = "f32",
  kernels?: Kernels,
): DecodedWeights => {
  const { tensors, metadata } = decodeSafetensors(bytes)
  if (metadata.format !== WEIGHTS_FORMAT)
    fail(
      "__metadata__.format",
      `expected "${WEIGHTS_FORMAT}", got ${JSON.stringify(metadata.format)}`,
    )
  const config = parseConfig(metadata.config)
  // Every tensor is checked before anything is allocated: the config in the header could ask
  // for more memory than exists, and only the tensors in the file bound it.
  const checked = new Map<string, Float32Array | Float64Array>()
  for (const [name, shape] of paramShapes(config)) {
    const tensor = tensors.get(name)
    if (!tensor) return fail(name, "missing")
    if (
      tensor.dtype !== "F32" &&
      tensor.dtype !== "BF16" &&
      tensor.dtype !== "F64" &&
      tensor.dtype !== "F16"
    ) {
      return fail(name, `dtype ${tensor.dtype} is not a float type`)
    }
    if (tensor.shape.length !== shape.length || tensor.shape.some((n, i) => n !== shape[i])) {
      return fail(name, `shape [${tensor.shape.join(", ")}], expected [${shape.join(", ")}]`)
    }
    checked.set(name, tensor.data)
  }
  for (const name of tensors.keys())
    if (!checked.has(name)) fail(name, "is not a parameter of this model")
  const params = buildParams(config, precision, (name, _shape, data) => {
    const values = checked.get(name)
    if (values) data.set(values)
  })
  let version: bigint | undefined
  if (metadata.version !== undefined) {
    if (!/^\d+$/.test(metadata.version))
      fail("__metadata__.version", `not a non-negative integer: ${metadata.version}`)
    version = BigInt(metadata.version)
  }
  return { model: TinyMoe.fromParams(config, params, precision, kernels), version, metadata }
}
