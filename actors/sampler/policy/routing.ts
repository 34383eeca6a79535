import type { RoutingRows } from "./backend.ts"
import { ShapeError } from "./fields.ts"

/** The MoE shape an engine's flat expert ids are reshaped with: rows [positions, layers, topK]. */
export interface RoutingLayout {
  /** Layers the engine records routing for (SGLang and vLLM: every decoder layer). */
  readonly layers: number
  /** Experts chosen per token per layer (`num_experts_per_tok`). */
  readonly topK: number
  /** Routed experts per layer; every id must be below it. */
  readonly numExperts: number
  /**
   * The layers (of `layers`) that route, ascending, when some are dense (DeepSeek-V3: 3 dense
   * then 58 MoE of 61): only their rows are kept, the dense layers' slots (zeros in SGLang, -1 in
   * SGL-JAX) are dropped. Unset: every layer routes.
   */
  readonly moeLayers?: ReadonlyArray<number>
}

/** Throws when a layout cannot describe real routing (it comes from configuration, not the wire). */
export const checkLayout = (layout: RoutingLayout): void => {
  const { layers, topK, numExperts } = layout
  for (const [name, value] of [
    ["layers", layers],
    ["topK", topK],
    ["numExperts", numExperts],
  ] as const)
    if (!Number.isSafeInteger(value) || value < 1)
      throw new RangeError(`routing.${name} must be a positive integer, got ${value}`)
  if (numExperts > 65_536)
    throw new RangeError(`routing.numExperts ${numExperts} exceeds uint16 ids`)
  if (topK > numExperts)
    throw new RangeError(`routing.topK ${topK} exceeds numExperts ${numExperts}`)
  const moe = layout.moeLayers
  if (moe !== undefined) {
    if (moe.length === 0) throw new RangeError("routing.moeLayers is empty")
    moe.forEach((l, i) => {
      if (!Number.isSafeInteger(l) || l < 0 || l >= layers || (i > 0 && l <= (moe[i - 1] ?? -1)))
        throw new RangeError(
          `routing.moeLayers must ascend within [0, ${layers}), got ${JSON.stringify(moe)}`,
        )
    })
  }
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

/** Strict standard base64 (Node's decoder silently skips characters it does not know). */
export const decodeBase64 = (text: string, path: string): Uint8Array => {
  if (text.length % 4 !== 0 || !BASE64.test(text))
    throw new ShapeError(path, `expected standard base64, got ${text.length} chars that are not`)
  const buffer = Buffer.from(text, "base64")
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
}

export type IntDtype =
  | "uint8"
  | "int8"
  | "uint16"
  | "int16"
  | "uint32"
  | "int32"
  | "int64"
  | "uint64"

const itemBytes: Readonly<Record<IntDtype, number>> = {
  uint8: 1,
  int8: 1,
  uint16: 2,
  int16: 2,
  uint32: 4,
  int32: 4,
  int64: 8,
  uint64: 8,
}

/** Little-endian integers of `dtype` packed in `bytes`. */
export const readLittleEndian = (
  bytes: Uint8Array,
  dtype: IntDtype,
  path: string,
): ArrayLike<number> => {
  const size = itemBytes[dtype]
  if (bytes.byteLength % size !== 0)
    throw new ShapeError(path, `${bytes.byteLength} bytes is not a whole number of ${dtype} values`)
  const count = bytes.byteLength / size
  if (dtype === "uint8") return bytes
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const out = size >= 4 && dtype !== "int32" ? new Float64Array(count) : new Int32Array(count)
  for (let i = 0; i < count; i++) {
    const at = i * size
    switch (dtype) {
      case "int8":
        out[i] = view.getInt8(at)
        break
      case "uint16":
        out[i] = view.getUint16(at, true)
        break
      case "int16":
        out[i] = view.getInt16(at, true)
        break
      case "uint32":
        out[i] = view.getUint32(at, true)
        break
      case "int32":
        out[i] = view.getInt32(at, true)
        break
      case "int64":
        out[i] = Number(view.getBigInt64(at, true))
        break
      case "uint64":
        out[i] = Number(view.getBigUint64(at, true))
        break
    }
  }
  return out
}

/**
 * Expert ids of `positions` consecutive positions from `start`, row-major [positions, layers,
 * topK], checked and narrowed to the type the trajectory stores (uint8 when numExperts <= 256).
 * With `moeLayers`, the rows keep those layers only: [positions, moeLayers, topK].
 */
export const routingRows = (
  ids: ArrayLike<number>,
  start: number,
  positions: number,
  layout: RoutingLayout,
  path: string,
): RoutingRows => {
  const { layers, topK, numExperts } = layout
  const perPosition = layers * topK
  if (ids.length !== positions * perPosition)
    throw new ShapeError(
      path,
      `expected ${positions} positions × ${layers} layers × ${topK} experts = ${positions * perPosition} ids, got ${ids.length}`,
    )
  const kept = layout.moeLayers ?? Array.from({ length: layers }, (_, l) => l)
  const size = positions * kept.length * topK
  const rows = numExperts <= 256 ? new Uint8Array(size) : new Uint16Array(size)
  let o = 0
  for (let p = 0; p < positions; p++)
    for (const layer of kept)
      for (let k = 0; k < topK; k++) {
        const id = ids[p * perPosition + layer * topK + k] ?? -1
        if (!(Number.isInteger(id) && id >= 0 && id < numExperts))
          throw new ShapeError(
            path,
            `expert id ${id} at position ${start + p}, layer ${layer}, slot ${k} is outside [0, ${numExperts})`,
          )
        rows[o++] = id
      }
  return { start, rows, layers: kept.length, topK, numExperts }
}

/**
 * Where the rows of an answer start. Both engines route every position but the last generated one
 * (`seqLen - 1` rows); when asked to skip the first `requested` positions, an engine that knows
 * the option sends `seqLen - 1 - requested` rows and one that does not sends them all.
 */
export const rowsStart = (
  rowCount: number,
  seqLen: number,
  requested: number,
  path: string,
): number => {
  const all = Math.max(0, seqLen - 1)
  if (rowCount === all - requested) return requested
  if (rowCount === all) return 0
  const wanted =
    requested > 0 ? `${all - requested} (from position ${requested}) or ${all}` : `${all}`
  throw new ShapeError(
    path,
    `expected routing for ${wanted} positions of a ${seqLen}-token sequence, got ${rowCount}`,
  )
}
