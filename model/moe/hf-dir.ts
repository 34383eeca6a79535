import { existsSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import type { Kernels } from "../kernels/kernels.ts"
import { CRITIC_FILE } from "../weights/hf-checkpoint.ts"
import { decodeSafetensors, SafetensorsError, type Tensor } from "../weights/index.ts"
import { ModelConfigError, type TinyMoeConfig } from "./config.ts"
import { fromHfConfig } from "./hf.ts"
import type { TinyMoe } from "./model.ts"
import type { Precision } from "./params.ts"
import { checkSeqLen, configMismatch, modelFromTensors } from "./weights.ts"

export const INDEX_FILE = "model.safetensors.index.json"
export const SINGLE_FILE = "model.safetensors"

export interface ReadHfOptions {
  /** The model the directory must hold (a job's): its config.json must describe the same one. */
  readonly expected?: TinyMoeConfig
  readonly precision?: Precision
  readonly kernels?: Kernels
}

export interface HfCheckpoint {
  readonly model: TinyMoe
  readonly config: TinyMoeConfig
  /** Whether `critic/value_head.safetensors` was there (else the value head is zero). */
  readonly critic: boolean
  /** The files the tensors came from, relative to the directory. */
  readonly files: ReadonlyArray<string>
}

const fail = (path: string, field: string, reason: string): never => {
  throw new SafetensorsError({ field, reason, path })
}

const readJson = (path: string): unknown => {
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch (e) {
    return fail(path, "file", `cannot read: ${e instanceof Error ? e.message : String(e)}`)
  }
  try {
    return JSON.parse(text)
  } catch (e) {
    return fail(path, "JSON", e instanceof Error ? e.message : String(e))
  }
}

const readTensors = (path: string): ReadonlyMap<string, Tensor> => {
  let bytes: Uint8Array
  try {
    bytes = readFileSync(path)
  } catch (e) {
    return fail(path, "file", `cannot read: ${e instanceof Error ? e.message : String(e)}`)
  }
  try {
    return decodeSafetensors(bytes).tensors
  } catch (e) {
    if (e instanceof SafetensorsError) return fail(path, e.field, e.reason)
    throw e
  }
}

/** Which shard holds each tensor, from the index; every shard named must be a plain file name. */
const readIndex = (dir: string): Map<string, string> => {
  const path = join(dir, INDEX_FILE)
  const index = readJson(path)
  const map =
    typeof index === "object" && index !== null
      ? (index as { weight_map?: unknown }).weight_map
      : undefined
  if (typeof map !== "object" || map === null || Array.isArray(map))
    return fail(path, "weight_map", "missing or not an object")
  const out = new Map<string, string>()
  for (const [name, file] of Object.entries(map as Record<string, unknown>)) {
    if (typeof file !== "string" || file.includes("/") || file.includes("\\") || file === "..")
      return fail(
        path,
        `weight_map.${name}`,
        `not a file of the directory: ${JSON.stringify(file)}`,
      )
    out.set(name, file)
  }
  return out
}

export interface CheckpointTensors {
  readonly tensors: ReadonlyMap<string, Tensor>
  /** The file (relative to the directory) each tensor came from. */
  readonly from: ReadonlyMap<string, string>
  readonly files: ReadonlyArray<string>
}

/**
 * Every tensor of a Hugging Face checkpoint directory, by name, unchecked against any config:
 * `model.safetensors.index.json` and the shards it names (each tensor where the index says, none
 * twice), or one `model.safetensors`; plus `critic/value_head.safetensors` when present. What an
 * engine's loader reads; SafetensorsError names the file and tensor.
 */
export const readCheckpointTensors = (dir: string): CheckpointTensors => {
  const tensors = new Map<string, Tensor>()
  const from = new Map<string, string>()
  const files: string[] = []
  const take = (file: string, only?: ReadonlySet<string>) => {
    const path = join(dir, file)
    if (!existsSync(path)) fail(path, "file", "missing")
    files.push(file)
    for (const [name, t] of readTensors(path)) {
      if (only && !only.has(name))
        fail(path, name, `is not in this shard according to ${INDEX_FILE}`)
      if (tensors.has(name)) fail(path, name, `also in ${from.get(name)}`)
      tensors.set(name, t)
      from.set(name, file)
    }
  }
  if (existsSync(join(dir, INDEX_FILE))) {
    const index = readIndex(dir)
    const byShard = new Map<string, Set<string>>()
    for (const [name, file] of index) {
      const set = byShard.get(file) ?? new Set<string>()
      set.add(name)
      byShard.set(file, set)
    }
    for (const [file, names] of byShard) take(file, names)
    for (const [name, file] of index)
      if (!tensors.has(name))
        fail(join(dir, file), name, `missing (${INDEX_FILE} names this shard)`)
  } else if (existsSync(join(dir, SINGLE_FILE))) take(SINGLE_FILE)
  else
    fail(
      dir,
      "directory",
      `neither ${INDEX_FILE} (with its shards) nor ${SINGLE_FILE}: not a Hugging Face checkpoint`,
    )
  if (existsSync(join(dir, CRITIC_FILE))) take(CRITIC_FILE)
  return { tensors, from, files }
}

/**
 * Reads a Hugging Face model directory of a Qwen3-MoE (config.json, and either
 * `model.safetensors.index.json` with its shards or one `model.safetensors`; the critic from
 * `critic/value_head.safetensors` when present), checks it — the config is a Qwen3-MoE t1
 * computes (and the expected one, when given), every tensor the config implies is present where
 * the index says, float, of its shape and finite, no tensor is unknown — and builds the model.
 * Errors are SafetensorsError naming the file and tensor, or ModelConfigError naming the field.
 */
export const readHfCheckpoint = (dir: string, options: ReadHfOptions = {}): HfCheckpoint => {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) fail(dir, "directory", "not a directory")
  const configPath = join(dir, "config.json")
  if (!existsSync(configPath))
    fail(configPath, "file", "missing: a model directory needs config.json")
  let config: TinyMoeConfig
  try {
    config = fromHfConfig(readJson(configPath))
  } catch (e) {
    if (e instanceof ModelConfigError)
      throw new ModelConfigError({ field: e.field, message: `${configPath}: ${e.message}` })
    throw e
  }
  if (options.expected) {
    const diff = configMismatch(options.expected, config)
    if (diff.length > 0)
      fail(configPath, "config", `another model than the job's: ${diff.join("; ")}`)
  }
  checkSeqLen(config, "max_position_embeddings", configPath)
  const { tensors, from, files } = readCheckpointTensors(dir)
  const where = (name: string) => {
    const file = from.get(name)
    return file === undefined ? dir : join(dir, file)
  }
  const { model, critic } = modelFromTensors(
    config,
    tensors,
    options.precision ?? "f32",
    options.kernels,
    where,
  )
  return { model, config, critic, files }
}
