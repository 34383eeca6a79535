import type { Tensor } from "./dtypes.ts"
import { DTYPE_BYTES } from "./dtypes.ts"
import { SafetensorsError } from "./errors.ts"
import { decodeSafetensors, encodeSafetensors } from "./safetensors.ts"

/**
 * The critic's tensors (t1's value head). They are not part of any engine's model, so an export
 * puts them in a file of their own under `critic/` (engines read the top level's shards only).
 */
export const CRITIC_TENSORS = { weight: "value_head.weight", bias: "value_head.bias" } as const
export const CRITIC_FILE = "critic/value_head.safetensors"

/** One file of a checkpoint directory (`name` may hold a subfolder, e.g. the critic's). */
export interface CheckpointFile {
  readonly name: string
  readonly bytes: Uint8Array
}

export interface HfCheckpointOptions {
  /** Largest shard, in bytes of tensor data (a tensor is never split). Default 5 GB (HF's). */
  readonly maxShardBytes?: number
  /** config.json keys to add or override (the architecture an engine loads the weights with). */
  readonly config?: Readonly<Record<string, unknown>>
  /**
   * Further files of the model directory, written as given: the tokenizer (`tokenizer.json`,
   * `tokenizer_config.json` with its chat template) and `generation_config.json`, without which
   * an engine cannot be launched on the directory.
   */
  readonly extraFiles?: ReadonlyArray<CheckpointFile>
}

const DEFAULT_SHARD_BYTES = 5_000_000_000

const tensorBytes = (t: Tensor): number =>
  t.shape.reduce((n, d) => n * d, 1) * (DTYPE_BYTES[t.dtype] ?? 0)

const pad5 = (n: number) => String(n).padStart(5, "0")

/**
 * A safetensors checkpoint (t1's weights file) as the directory Hugging Face tools and inference
 * engines load: `model-0000i-of-0000n.safetensors` shards (tensors in name order, each shard under
 * `maxShardBytes` unless one tensor alone is larger), `model.safetensors.index.json` (total size
 * and which shard holds each tensor), `config.json` (from the weights' `config` metadata, as
 * t1 writes it, plus `options.config`) and `options.extraFiles`. The critic's tensors, when the
 * weights have them, go to `critic/value_head.safetensors`, outside the index and the top level
 * that engines read.
 */
export const hfCheckpointFiles = (
  weights: Uint8Array,
  options: HfCheckpointOptions = {},
): CheckpointFile[] => {
  const { tensors, metadata } = decodeSafetensors(weights)
  const limit = options.maxShardBytes ?? DEFAULT_SHARD_BYTES
  if (!(Number.isSafeInteger(limit) && limit > 0))
    throw new SafetensorsError({
      field: "maxShardBytes",
      reason: `must be a positive integer, got ${limit}`,
    })
  const criticNames = new Set<string>(Object.values(CRITIC_TENSORS))
  const names = [...tensors.keys()].filter((n) => !criticNames.has(n)).sort()
  const groups: string[][] = []
  let current: string[] = []
  let size = 0
  let total = 0
  for (const name of names) {
    const n = tensorBytes(tensors.get(name) as Tensor)
    total += n
    if (current.length > 0 && size + n > limit) {
      groups.push(current)
      current = []
      size = 0
    }
    current.push(name)
    size += n
  }
  if (current.length > 0) groups.push(current)
  const shardName = (i: number) => `model-${pad5(i + 1)}-of-${pad5(groups.length)}.safetensors`
  const weightMap: Record<string, string> = {}
  const shards = groups.map((group, i) => {
    for (const name of group) weightMap[name] = shardName(i)
    const subset = new Map(group.map((name) => [name, tensors.get(name) as Tensor]))
    return { name: shardName(i), bytes: encodeSafetensors(subset, { format: "pt" }) }
  })
  let modelConfig: Record<string, unknown> = {}
  if (metadata.config !== undefined) {
    try {
      modelConfig = JSON.parse(metadata.config) as Record<string, unknown>
    } catch (e) {
      throw new SafetensorsError({ field: "__metadata__.config", reason: `not JSON: ${String(e)}` })
    }
  }
  const config = {
    ...modelConfig,
    ...(metadata.version === undefined ? {} : { t1_policy_version: metadata.version }),
    ...options.config,
  }
  const json = (value: unknown) => new TextEncoder().encode(`${JSON.stringify(value, null, 2)}\n`)
  const critic = new Map(
    [...tensors].filter(([name]) => criticNames.has(name)).map(([n, t]) => [n, t] as const),
  )
  const extra = options.extraFiles ?? []
  for (const f of extra)
    if (f.name.endsWith(".safetensors") || f.name === "config.json" || f.name.includes(".."))
      throw new SafetensorsError({
        field: "extraFiles",
        reason: `${f.name}: an extra file cannot be a weights file, config.json or leave the directory`,
      })
  return [
    ...shards,
    ...(critic.size > 0
      ? [{ name: CRITIC_FILE, bytes: encodeSafetensors(critic, { format: "pt", t1: "critic" }) }]
      : []),
    ...extra,
    {
      name: "model.safetensors.index.json",
      bytes: json({ metadata: { total_size: total }, weight_map: weightMap }),
    },
    { name: "config.json", bytes: json(config) },
  ]
}
