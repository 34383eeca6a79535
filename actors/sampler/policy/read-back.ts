/**
 * Reading one tensor back from an engine after a load, to catch an engine that answers success
 * but serves what it served before (SGLang's update skips every tensor name its model does not
 * have and still reports success). SGLang's `GET|POST /get_weights_by_name` `{name,
 * truncate_size}` answers the parameter as float32 nested lists cut to its first
 * `truncate_size` rows (`tensor.tolist()[:truncate_size]`; one such list per data-parallel rank
 * when dp_size > 1), or 400 "Get parameter by name failed" for a model class that has no
 * `get_weights_by_name` (Qwen3-MoE among them) or a name it does not have
 * (python/sglang/srt/entrypoints/http_server.py, managers/io_struct.py GetWeightsByNameReqInput,
 * models/llama.py get_weights_by_name).
 */
import { readFile } from "node:fs/promises"
import { join } from "node:path"
import { decodeSafetensors } from "../../../model/weights/index.ts"

/** Rows asked for: enough to see a change, small on the wire. */
export const READ_BACK_ROWS = 8

/** Tensors to read back, in order of preference: small, and moved by every training step. */
const PREFERRED = ["model.layers.0.mlp.gate.weight", "lm_head.weight", "model.embed_tokens.weight"]

/** A tensor as exported: shape and float32 values. */
export interface ExportedTensor {
  readonly name: string
  readonly shape: ReadonlyArray<number>
  readonly data: Float32Array
}

/**
 * The tensor of the checkpoint at `dir` to read back (from its index), or undefined for a
 * directory without an index.
 */
export const exportedTensor = async (dir: string): Promise<ExportedTensor | undefined> => {
  let map: Record<string, unknown>
  try {
    const index = JSON.parse(await readFile(join(dir, "model.safetensors.index.json"), "utf8"))
    map = (index as { weight_map: Record<string, unknown> }).weight_map
  } catch {
    return undefined
  }
  const names = Object.keys(map).sort()
  const name = PREFERRED.find((n) => n in map) ?? names[0]
  if (name === undefined) return undefined
  const { tensors } = decodeSafetensors(
    new Uint8Array(await readFile(join(dir, String(map[name])))),
  )
  const t = tensors.get(name)
  if (t === undefined || !(t.data instanceof Float32Array || t.data instanceof Float64Array))
    return undefined
  return { name, shape: [...t.shape], data: Float32Array.from(t.data) }
}

const flatten = (value: unknown, out: number[]): boolean => {
  if (typeof value === "number") {
    out.push(value)
    return true
  }
  if (!Array.isArray(value)) return false
  return value.every((v) => flatten(v, out))
}

/**
 * Why the engine's answer is not the exported tensor's first rows, or undefined when it is. The
 * engine may serve lower precision than the export: values within bfloat16's rounding
 * (relative 2^-7, absolute 1e-6) are the same.
 */
export const readBackMismatch = (
  answer: unknown,
  tensor: ExportedTensor,
  rows: number,
): string | undefined => {
  const rowSize = tensor.shape.slice(1).reduce((n, d) => n * d, 1)
  const expected = tensor.data.subarray(0, Math.min(rows, tensor.shape[0] ?? 0) * rowSize)
  const got: number[] = []
  if (!flatten(answer, got)) return "the answer is not a list of numbers"
  if (expected.length === 0 || got.length === 0 || got.length % expected.length !== 0)
    return `${got.length} values for ${expected.length} expected`
  let worst = 0
  let at = -1
  for (let i = 0; i < got.length; i++) {
    const e = expected[i % expected.length] as number
    const diff = Math.abs((got[i] as number) - e)
    if (diff > Math.max(Math.abs(e) * 2 ** -7, 1e-6) && diff > worst) {
      worst = diff
      at = i % expected.length
    }
  }
  return at < 0
    ? undefined
    : `holds ${got[at]} at element ${at} where the checkpoint has ${expected[at]} (|diff| ${worst.toPrecision(3)})`
}
