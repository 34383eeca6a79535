/**
 * The tensors an engine double serves, by Hugging Face name, and how a checkpoint directory is
 * loaded into them the way SGLang's `update_weights_from_disk` does: the model's
 * `load_weights` walks the checkpoint's tensors and copies each one whose name the model has
 * into it, skipping names it does not know (python/sglang/srt/models/qwen3_moe.py
 * `Qwen3MoeForCausalLM.load_weights`: `if name not in params_dict: continue`). Test support only.
 */
import { readCheckpointTensors } from "../../../model/moe/hf-dir.ts"
import { CRITIC_FILE, type Tensor } from "../../../model/weights/index.ts"

/** A served tensor: its shape and float32 values (BF16/F16 files widen exactly). */
export interface ServedTensor {
  readonly shape: ReadonlyArray<number>
  readonly data: Float32Array
}

/** What one load did to the served model. */
export interface LoadReport {
  /** Tensors of the checkpoint whose name the model serves. */
  readonly known: number
  /** Known tensors whose values differ from what was served. */
  readonly changed: number
  /** Tensors of the checkpoint the model does not serve (skipped). */
  readonly skipped: ReadonlyArray<string>
  /** Tensors the model serves. */
  readonly served: number
}

/** The directory holds no checkpoint an engine could read. */
export class NoCheckpoint extends Error {}

const asFloat32 = (name: string, t: Tensor): Float32Array => {
  if (t.data instanceof Float32Array) return Float32Array.from(t.data)
  if (t.data instanceof Float64Array) return Float32Array.from(t.data)
  throw new NoCheckpoint(`tensor ${name}: dtype ${t.dtype} is not a floating-point weight`)
}

/**
 * The tensors of a checkpoint directory as an engine's loader reads them: the index and its shards
 * (or one model.safetensors), by name, unchecked against any config (readCheckpointTensors). The
 * critic, outside the index, is not part of what an engine loads.
 */
export const readCheckpointDir = async (dir: string): Promise<Map<string, ServedTensor>> => {
  let read: ReturnType<typeof readCheckpointTensors>
  try {
    read = readCheckpointTensors(dir)
  } catch (e) {
    throw new NoCheckpoint(e instanceof Error ? e.message : String(e))
  }
  const out = new Map<string, ServedTensor>()
  for (const [name, t] of read.tensors)
    if (read.from.get(name) !== CRITIC_FILE)
      out.set(name, { shape: [...t.shape], data: asFloat32(name, t) })
  return out
}

const sameValues = (a: Float32Array, b: Float32Array): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false
  return true
}

/** The served model: its tensors, and loads into them by name. */
export class ServedWeights {
  private tensors = new Map<string, ServedTensor>()

  constructor(initial: ReadonlyMap<string, ServedTensor> = new Map()) {
    this.reset(initial)
  }

  /** Serves copies of `tensors` (the launch weights). */
  reset(tensors: ReadonlyMap<string, ServedTensor>): void {
    this.tensors = new Map(
      [...tensors].map(([name, t]) => [name, { shape: [...t.shape], data: t.data.slice() }]),
    )
  }

  get size(): number {
    return this.tensors.size
  }

  get(name: string): ServedTensor | undefined {
    return this.tensors.get(name)
  }

  /**
   * Copies every checkpoint tensor the model serves into it. A known name with another shape
   * fails the whole load before anything changes (the weight loader's shape assertion).
   */
  load(checkpoint: ReadonlyMap<string, ServedTensor>): LoadReport {
    const skipped: string[] = []
    const updates: Array<[string, ServedTensor]> = []
    for (const [name, t] of checkpoint) {
      const served = this.tensors.get(name)
      if (served === undefined) {
        skipped.push(name)
        continue
      }
      if (served.shape.join(",") !== t.shape.join(","))
        throw new NoCheckpoint(
          `${name}: the checkpoint's shape [${t.shape.join(", ")}] is not the served [${served.shape.join(", ")}]`,
        )
      updates.push([name, t])
    }
    let changed = 0
    for (const [name, t] of updates) {
      const served = this.tensors.get(name) as ServedTensor
      if (!sameValues(served.data, t.data)) changed++
      this.tensors.set(name, { shape: [...t.shape], data: t.data.slice() })
    }
    return { known: updates.length, changed, skipped, served: this.tensors.size }
  }

  /**
   * SGLang's `get_weights_by_name` answer: the parameter as float32 nested lists, cut to its
   * first `truncateSize` rows (`tensor.tolist()[:truncate_size]`); undefined for a name the
   * model does not have.
   */
  readBack(name: string, truncateSize: number): unknown[] | undefined {
    const t = this.tensors.get(name)
    if (t === undefined) return undefined
    const nest = (offset: number, dims: ReadonlyArray<number>): unknown[] | number => {
      const [first, ...rest] = dims
      if (first === undefined) return t.data[offset] as number
      const stride = rest.reduce((n, d) => n * d, 1)
      return Array.from({ length: first }, (_, i) => nest(offset + i * stride, rest))
    }
    const whole = nest(0, t.shape)
    return (Array.isArray(whole) ? whole : [whole]).slice(0, Math.max(0, truncateSize))
  }
}
