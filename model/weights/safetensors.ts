import {
  bf16BitsToF32,
  DTYPE_ARRAY,
  DTYPE_BYTES,
  type Dtype,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  isDtype,
  type Tensor,
} from "./dtypes.ts"
import { SafetensorsError } from "./errors.ts"

/**
 * The safetensors format (https://github.com/huggingface/safetensors): an 8-byte little-endian
 * u64 header length N, N bytes of UTF-8 JSON
 * `{"__metadata__": {string: string}, name: {"dtype", "shape", "data_offsets": [begin, end]}, …}`
 * padded with spaces so that the data starts on an 8-byte boundary, then the tensors' raw
 * little-endian bytes, back to back, with offsets relative to the start of the data.
 */

/** Largest header accepted, as in the reference implementation (a guard against garbage). */
export const MAX_HEADER_BYTES = 100_000_000

/** The contents of a safetensors file. */
export interface Safetensors {
  /** In file (data-offset) order. */
  readonly tensors: Map<string, Tensor>
  /** `__metadata__`, or `{}` when the file has none. */
  readonly metadata: Record<string, string>
}

const METADATA_KEY = "__metadata__"

const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1

function fail(field: string, reason: string): never {
  throw new SafetensorsError({ field, reason })
}

const tensorField = (name: string, field?: string): string =>
  field === undefined ? `tensor ${JSON.stringify(name)}` : `tensor ${JSON.stringify(name)} ${field}`

const shapeText = (shape: readonly number[]): string => `[${shape.join(",")}]`

/** Number of elements, or a reason the shape is not one. */
function elementCount(shape: readonly unknown[]): number | string {
  let n = 1
  for (const d of shape) {
    if (typeof d !== "number" || !Number.isSafeInteger(d) || d < 0) {
      return `dimension ${JSON.stringify(d)} is not a non-negative integer`
    }
    n *= d
    if (!Number.isSafeInteger(n)) return "has more elements than a safe integer"
  }
  return n
}

function checkEndianness(): void {
  if (!LITTLE_ENDIAN_HOST) fail("host", "big-endian hosts are not supported")
}

// ---------------------------------------------------------------------------------------------
// Encode

function tensorBytes(name: string, t: Tensor): Uint8Array {
  const dtype: string = t.dtype
  if (!isDtype(dtype))
    return fail(tensorField(name, "dtype"), `unknown dtype ${JSON.stringify(dtype)}`)
  const Ctor = DTYPE_ARRAY[dtype]
  if (!(t.data instanceof Ctor)) {
    fail(
      tensorField(name, "data"),
      `dtype ${dtype} needs a ${Ctor.name}, got ${t.data.constructor.name}`,
    )
  }
  const count = elementCount(t.shape)
  if (typeof count === "string") fail(tensorField(name, "shape"), count)
  if (count !== t.data.length) {
    fail(
      tensorField(name, "shape"),
      `shape ${shapeText(t.shape)} has ${count} elements, data has ${t.data.length}`,
    )
  }
  switch (t.dtype) {
    case "BF16": {
      const h = f32ToBf16Bits(t.data)
      return new Uint8Array(h.buffer)
    }
    case "F16": {
      const h = f32ToF16Bits(t.data)
      return new Uint8Array(h.buffer)
    }
    case "BOOL": {
      const bad = t.data.findIndex((v) => v > 1)
      if (bad >= 0)
        fail(tensorField(name, "data"), `BOOL element ${bad} is ${t.data[bad]}, not 0 or 1`)
      return t.data
    }
    default:
      return new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)
  }
}

const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/**
 * The safetensors bytes of `tensors` (and `metadata`, written as `__metadata__` when given).
 *
 * Deterministic: the same tensors give the same bytes whatever the map's insertion order. Tensors
 * are laid out, and listed in the header, by element size (largest first) and then by name in
 * UTF-16 code-unit order; since the data starts 8-byte aligned, every tensor's data is then
 * aligned to its element size and `decodeSafetensors` can return views instead of copies.
 * BF16 and F16 tensors are given as Float32Array and rounded to nearest, ties to even.
 */
export function encodeSafetensors(
  tensors: ReadonlyMap<string, Tensor>,
  metadata?: Readonly<Record<string, string>>,
): Uint8Array {
  checkEndianness()
  const names = [...tensors.keys()].sort((a, b) => {
    const ta = tensors.get(a) as Tensor
    const tb = tensors.get(b) as Tensor
    const sa = DTYPE_BYTES[ta.dtype] ?? 0
    const sb = DTYPE_BYTES[tb.dtype] ?? 0
    return sb - sa || byCodeUnits(a, b)
  })
  const parts: string[] = []
  if (metadata !== undefined) {
    const entries = Object.keys(metadata)
      .sort(byCodeUnits)
      .map((key) => {
        const value: unknown = metadata[key]
        if (typeof value !== "string") {
          fail(`${METADATA_KEY}.${key}`, `metadata values must be strings, got ${typeof value}`)
        }
        return `${JSON.stringify(key)}:${JSON.stringify(value)}`
      })
    parts.push(`${JSON.stringify(METADATA_KEY)}:{${entries.join(",")}}`)
  }
  const chunks: Uint8Array[] = []
  let offset = 0
  for (const name of names) {
    if (name === METADATA_KEY) fail(tensorField(name), `${METADATA_KEY} is reserved for metadata`)
    const t = tensors.get(name) as Tensor
    const bytes = tensorBytes(name, t)
    const end = offset + bytes.byteLength
    // Built by hand: JSON.stringify of an object would move integer-like names to the front.
    parts.push(
      `${JSON.stringify(name)}:{"dtype":"${t.dtype}","shape":${JSON.stringify(t.shape)},"data_offsets":[${offset},${end}]}`,
    )
    chunks.push(bytes)
    offset = end
  }
  const json = new TextEncoder().encode(`{${parts.join(",")}}`)
  const headerLength = Math.ceil(json.byteLength / 8) * 8
  const out = new Uint8Array(8 + headerLength + offset)
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLength), true)
  out.set(json, 8)
  out.fill(0x20, 8 + json.byteLength, 8 + headerLength)
  let at = 8 + headerLength
  for (const chunk of chunks) {
    out.set(chunk, at)
    at += chunk.byteLength
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Decode

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
type JsonObject = { [key: string]: Json }

const isObject = (v: Json | undefined): v is JsonObject =>
  typeof v === "object" && v !== null && !Array.isArray(v)

/** A typed view of `raw` when it is aligned, else of an aligned copy. */
function aligned<T>(
  raw: Uint8Array,
  size: number,
  make: (buffer: ArrayBufferLike, byteOffset: number, length: number) => T,
): T {
  const length = raw.byteLength / size
  if (raw.byteOffset % size === 0) return make(raw.buffer, raw.byteOffset, length)
  // A copy that owns its buffer: a Node Buffer's .slice() would be a view into its pool.
  return make(new Uint8Array(raw).buffer, 0, length)
}

function decodeData(name: string, dtype: Dtype, shape: number[], raw: Uint8Array): Tensor {
  const u16 = () => aligned(raw, 2, (b, o, n) => new Uint16Array(b, o, n))
  switch (dtype) {
    case "F64":
      return { dtype, shape, data: aligned(raw, 8, (b, o, n) => new Float64Array(b, o, n)) }
    case "F32":
      return { dtype, shape, data: aligned(raw, 4, (b, o, n) => new Float32Array(b, o, n)) }
    case "F16":
      return { dtype, shape, data: f16BitsToF32(u16()) }
    case "BF16":
      return { dtype, shape, data: bf16BitsToF32(u16()) }
    case "I64":
      return { dtype, shape, data: aligned(raw, 8, (b, o, n) => new BigInt64Array(b, o, n)) }
    case "I32":
      return { dtype, shape, data: aligned(raw, 4, (b, o, n) => new Int32Array(b, o, n)) }
    case "I16":
      return { dtype, shape, data: aligned(raw, 2, (b, o, n) => new Int16Array(b, o, n)) }
    case "I8":
      return { dtype, shape, data: new Int8Array(raw.buffer, raw.byteOffset, raw.byteLength) }
    case "U64":
      return { dtype, shape, data: aligned(raw, 8, (b, o, n) => new BigUint64Array(b, o, n)) }
    case "U32":
      return { dtype, shape, data: aligned(raw, 4, (b, o, n) => new Uint32Array(b, o, n)) }
    case "U16":
      return { dtype, shape, data: u16() }
    case "U8":
      return { dtype, shape, data: raw }
    case "BOOL": {
      const bad = raw.findIndex((v) => v > 1)
      if (bad >= 0)
        fail(tensorField(name, "data"), `BOOL element ${bad} is ${raw[bad]}, not 0 or 1`)
      return { dtype, shape, data: raw }
    }
  }
}

interface Entry {
  readonly name: string
  readonly dtype: Dtype
  readonly shape: number[]
  readonly begin: number
  readonly end: number
}

function readEntry(name: string, node: Json | undefined, dataLength: number): Entry {
  if (!isObject(node)) return fail(tensorField(name), "is not an object")
  const dtype = node.dtype
  if (typeof dtype !== "string") return fail(tensorField(name, "dtype"), "missing or not a string")
  if (!isDtype(dtype))
    return fail(tensorField(name, "dtype"), `unknown dtype ${JSON.stringify(dtype)}`)
  const shape = node.shape
  if (!Array.isArray(shape)) return fail(tensorField(name, "shape"), "missing or not an array")
  const count = elementCount(shape)
  if (typeof count === "string") return fail(tensorField(name, "shape"), count)
  const offsets = node.data_offsets
  if (
    !Array.isArray(offsets) ||
    offsets.length !== 2 ||
    !offsets.every((o) => typeof o === "number" && Number.isSafeInteger(o) && o >= 0)
  ) {
    return fail(
      tensorField(name, "data_offsets"),
      `expected [begin, end] of non-negative integers, got ${JSON.stringify(offsets)}`,
    )
  }
  const [begin, end] = offsets as [number, number]
  if (end < begin) fail(tensorField(name, "data_offsets"), `end ${end} is before begin ${begin}`)
  if (end > dataLength) {
    fail(
      tensorField(name, "data_offsets"),
      `[${begin},${end}] is out of range: the data section is ${dataLength} bytes`,
    )
  }
  const needed = count * DTYPE_BYTES[dtype]
  if (end - begin !== needed) {
    fail(
      tensorField(name, "data_offsets"),
      `shape ${shapeText(shape as number[])} ${dtype} needs ${needed} bytes, data_offsets [${begin},${end}] span ${end - begin}`,
    )
  }
  return { name, dtype, shape: shape as number[], begin, end }
}

/**
 * The tensors and metadata in safetensors `bytes`, checked: the header length, JSON, dtypes,
 * shapes against offsets, and that the tensors tile the data section exactly (no overlap, gap,
 * or trailing bytes). Throws SafetensorsError naming the field.
 *
 * F64/F32/integer tensors whose data is aligned to their element size (always so for files this
 * module writes) are views into `bytes` (no copy): changing one changes the other. Unaligned data
 * is copied; BF16 and F16 are converted to new Float32Arrays.
 */
export function decodeSafetensors(bytes: Uint8Array): Safetensors {
  checkEndianness()
  if (bytes.byteLength < 8) {
    fail(
      "header length",
      `truncated: ${bytes.byteLength} bytes, fewer than the 8-byte header length`,
    )
  }
  const declared = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true)
  if (declared > BigInt(MAX_HEADER_BYTES)) {
    fail("header length", `${declared} bytes exceeds the ${MAX_HEADER_BYTES}-byte limit`)
  }
  const headerLength = Number(declared)
  if (8 + headerLength > bytes.byteLength) {
    fail(
      "header length",
      `${headerLength} bytes runs past the end of the file (${bytes.byteLength} bytes, so at most ${bytes.byteLength - 8})`,
    )
  }
  let text: string
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(8, 8 + headerLength))
  } catch {
    return fail("header JSON", "is not valid UTF-8")
  }
  let root: Json
  try {
    root = JSON.parse(text) as Json
  } catch (e) {
    return fail("header JSON", `is not valid JSON (${e instanceof Error ? e.message : String(e)})`)
  }
  if (!isObject(root)) return fail("header JSON", "is not an object")

  const dataStart = 8 + headerLength
  const dataLength = bytes.byteLength - dataStart
  const metadata: Record<string, string> = {}
  const entries: Entry[] = []
  for (const [name, node] of Object.entries(root)) {
    if (name === METADATA_KEY) {
      if (!isObject(node)) return fail(METADATA_KEY, "is not an object")
      for (const [key, value] of Object.entries(node)) {
        if (typeof value !== "string") {
          fail(
            `${METADATA_KEY}.${key}`,
            `metadata values must be strings, got ${JSON.stringify(value)}`,
          )
        }
        // defineProperty, not assignment: a key named "__proto__" must stay an own entry.
        Object.defineProperty(metadata, key, {
          value,
          enumerable: true,
          writable: true,
          configurable: true,
        })
      }
    } else {
      entries.push(readEntry(name, node, dataLength))
    }
  }

  entries.sort((a, b) => a.begin - b.begin || a.end - b.end)
  let cursor = 0
  let previous: Entry | undefined
  for (const e of entries) {
    if (e.begin < cursor && previous !== undefined) {
      fail(
        tensorField(e.name, "data_offsets"),
        `[${e.begin},${e.end}] overlaps tensor ${JSON.stringify(previous.name)} [${previous.begin},${previous.end}]`,
      )
    }
    if (e.begin > cursor) {
      fail(
        tensorField(e.name, "data_offsets"),
        `[${e.begin},${e.end}] leaves a gap after byte ${cursor}: tensor data must be contiguous`,
      )
    }
    cursor = e.end
    previous = e
  }
  if (cursor !== dataLength) {
    fail(
      "data",
      `the tensors cover ${cursor} bytes but the data section is ${dataLength}: ${dataLength - cursor} trailing bytes`,
    )
  }

  const tensors = new Map<string, Tensor>()
  for (const e of entries) {
    const raw = bytes.subarray(dataStart + e.begin, dataStart + e.end)
    tensors.set(e.name, decodeData(e.name, e.dtype, e.shape, raw))
  }
  return { tensors, metadata }
}
