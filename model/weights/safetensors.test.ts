import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { bf16Round, type Dtype, f16BitsToF32, f32ToF16Bits, type Tensor } from "./dtypes.ts"
import { SafetensorsError } from "./errors.ts"
import { decodeSafetensors, encodeSafetensors, MAX_HEADER_BYTES } from "./safetensors.ts"

const bytesOf = (d: ArrayBufferView): number[] => [
  ...new Uint8Array(d.buffer, d.byteOffset, d.byteLength),
]

/** A file from a header (object or raw text) and data, laid out as the format says. */
function file(header: object | string, data: number[] | Uint8Array = [], pad = true): Uint8Array {
  let json = new TextEncoder().encode(typeof header === "string" ? header : JSON.stringify(header))
  if (pad && json.length % 8 !== 0) {
    const padded = new Uint8Array(Math.ceil(json.length / 8) * 8).fill(0x20)
    padded.set(json)
    json = padded
  }
  const out = new Uint8Array(8 + json.length + data.length)
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true)
  out.set(json, 8)
  out.set(data, 8 + json.length)
  return out
}

function errorOf(f: () => unknown): SafetensorsError {
  try {
    f()
  } catch (e) {
    if (e instanceof SafetensorsError) return e
    throw e
  }
  throw new Error("expected a SafetensorsError")
}

const decodeError = (bytes: Uint8Array): string => {
  const e = errorOf(() => decodeSafetensors(bytes))
  expect(e._tag).toBe("SafetensorsError")
  return e.message
}

const everyDtype: Array<[string, Tensor]> = [
  ["f64", { dtype: "F64", shape: [2, 2], data: new Float64Array([1.5, -0, Math.PI, -1e300]) }],
  ["f32", { dtype: "F32", shape: [3], data: new Float32Array([0.1, Infinity, -2.5]) }],
  ["f16", { dtype: "F16", shape: [2], data: new Float32Array([0.5, -65504]) }],
  ["bf16", { dtype: "BF16", shape: [1, 3], data: new Float32Array([1, -0.0078125, 2 ** 127]) }],
  ["i64", { dtype: "I64", shape: [2], data: new BigInt64Array([-(2n ** 63n), 2n ** 62n + 7n]) }],
  ["i32", { dtype: "I32", shape: [2], data: new Int32Array([-(2 ** 31), 123456789]) }],
  ["i16", { dtype: "I16", shape: [1], data: new Int16Array([-300]) }],
  ["i8", { dtype: "I8", shape: [2], data: new Int8Array([-128, 127]) }],
  ["u64", { dtype: "U64", shape: [1], data: new BigUint64Array([2n ** 64n - 1n]) }],
  ["u32", { dtype: "U32", shape: [1], data: new Uint32Array([4294967295]) }],
  ["u16", { dtype: "U16", shape: [3], data: new Uint16Array([0, 1, 65535]) }],
  ["u8", { dtype: "U8", shape: [2, 1], data: new Uint8Array([0, 255]) }],
  ["bool", { dtype: "BOOL", shape: [3], data: new Uint8Array([1, 0, 1]) }],
  ["scalar", { dtype: "F32", shape: [], data: new Float32Array([42]) }],
  ["empty", { dtype: "F32", shape: [0, 4], data: new Float32Array(0) }],
]

describe("encodeSafetensors / decodeSafetensors", () => {
  it("round-trips every dtype, with metadata", () => {
    const tensors = new Map(everyDtype)
    const { tensors: back, metadata } = decodeSafetensors(
      encodeSafetensors(tensors, { format: "pt", step: "7" }),
    )
    expect(metadata).toEqual({ format: "pt", step: "7" })
    expect(new Set(back.keys())).toEqual(new Set(tensors.keys()))
    for (const [name, t] of tensors) {
      const b = back.get(name)
      expect(b?.dtype, name).toBe(t.dtype)
      expect(b?.shape, name).toEqual(t.shape)
      expect(b?.data.constructor, name).toBe(t.data.constructor)
      expect(bytesOf(b?.data ?? new Uint8Array()), name).toEqual(bytesOf(t.data))
    }
  })

  it("keeps metadata keys that name Object.prototype members as plain entries", () => {
    const meta = JSON.parse('{"__proto__":"x","constructor":"y","toString":"z"}') as Record<
      string,
      string
    >
    const { metadata } = decodeSafetensors(encodeSafetensors(new Map(), meta))
    expect(Object.getPrototypeOf(metadata)).toBe(Object.prototype)
    expect(Object.entries(metadata).sort()).toEqual([
      ["__proto__", "x"],
      ["constructor", "y"],
      ["toString", "z"],
    ])
  })

  it("writes exactly the bytes of a hand-built two-tensor file", () => {
    const tensors = new Map<string, Tensor>([
      ["a", { dtype: "U8", shape: [3], data: new Uint8Array([1, 2, 3]) }],
      ["b", { dtype: "F32", shape: [2], data: new Float32Array([1, -2]) }],
    ])
    // "b" (4-byte elements) is laid out before "a" (1-byte elements): larger elements first.
    const header =
      '{"__metadata__":{"format":"pt"},' +
      '"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},' +
      '"a":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}}'
    expect(header.length).toBe(138)
    const expected = [
      ...[144, 0, 0, 0, 0, 0, 0, 0], // header length 144 = 138 bytes of JSON + 6 spaces
      ...[...header].map((c) => c.charCodeAt(0)),
      ...[0x20, 0x20, 0x20, 0x20, 0x20, 0x20],
      ...[0x00, 0x00, 0x80, 0x3f], // 1.0f
      ...[0x00, 0x00, 0x00, 0xc0], // -2.0f
      ...[1, 2, 3],
    ]
    const encoded = encodeSafetensors(tensors, { format: "pt" })
    expect([...encoded]).toEqual(expected)

    const decoded = decodeSafetensors(new Uint8Array(expected))
    expect([...decoded.tensors.keys()]).toEqual(["b", "a"])
    expect(decoded.tensors.get("b")).toEqual({
      dtype: "F32",
      shape: [2],
      data: new Float32Array([1, -2]),
    })
    expect(decoded.tensors.get("a")?.data).toEqual(new Uint8Array([1, 2, 3]))
  })

  it("is deterministic: insertion order does not matter, integer-like names keep code-unit order", () => {
    const t = (v: number): Tensor => ({ dtype: "F32", shape: [1], data: new Float32Array([v]) })
    const one = encodeSafetensors(
      new Map([
        ["10", t(1)],
        ["2", t(2)],
        ["a", t(3)],
      ]),
      { z: "1", a: "2" },
    )
    const two = encodeSafetensors(
      new Map([
        ["a", t(3)],
        ["2", t(2)],
        ["10", t(1)],
      ]),
      { a: "2", z: "1" },
    )
    expect(one).toEqual(two)
    const text = new TextDecoder().decode(one)
    expect(text.indexOf('"10":{')).toBeLessThan(text.indexOf('"2":{'))
    expect(text.indexOf('"2":{')).toBeLessThan(text.indexOf('"a":{'))
    expect(text).toContain('"__metadata__":{"a":"2","z":"1"}')
  })

  it("pads the header to 8 bytes so every tensor's data is aligned", () => {
    const bytes = encodeSafetensors(new Map(everyDtype))
    const n = Number(new DataView(bytes.buffer).getBigUint64(0, true))
    expect(n % 8).toBe(0)
    for (const [name, t] of decodeSafetensors(bytes).tensors) {
      if (t.dtype === "BF16" || t.dtype === "F16") continue
      expect(t.data.buffer, name).toBe(bytes.buffer)
    }
  })

  it("returns views when aligned and copies when not", () => {
    const bytes = encodeSafetensors(
      new Map<string, Tensor>([
        ["w", { dtype: "F32", shape: [2], data: new Float32Array([1, 2]) }],
      ]),
    )
    const view = decodeSafetensors(bytes).tensors.get("w")
    expect(view?.data.buffer).toBe(bytes.buffer)
    const shifted = new Uint8Array(bytes.length + 1)
    shifted.set(bytes, 1)
    const unaligned = shifted.subarray(1)
    const copy = decodeSafetensors(unaligned).tensors.get("w")
    expect(copy?.data.buffer).not.toBe(shifted.buffer)
    expect(copy?.data).toEqual(new Float32Array([1, 2]))
  })

  it("reads an unpadded header written by another tool (unaligned data is copied)", () => {
    const f = new Float32Array([3.5])
    const bytes = file(
      {
        x: { dtype: "F32", shape: [1], data_offsets: [0, 4] },
        y: { dtype: "U8", shape: [0], data_offsets: [4, 4] },
      },
      bytesOf(f),
      false,
    )
    const { tensors, metadata } = decodeSafetensors(bytes)
    expect(metadata).toEqual({})
    expect(tensors.get("x")?.data).toEqual(f)
    expect(tensors.get("y")?.data).toEqual(new Uint8Array(0))
  })

  it("encodes BF16 and F16 from f32 rounded to nearest even", () => {
    const data = new Float32Array([1.00390625, 1.01171875, 1 + 2 ** -11, 1 + 3 * 2 ** -11])
    const { tensors } = decodeSafetensors(
      encodeSafetensors(
        new Map<string, Tensor>([
          ["b", { dtype: "BF16", shape: [4], data }],
          ["h", { dtype: "F16", shape: [4], data }],
        ]),
      ),
    )
    expect([...(tensors.get("b")?.data ?? [])]).toEqual([1, 1.015625, 1, 1])
    expect([...(tensors.get("h")?.data ?? [])]).toEqual([1.00390625, 1.01171875, 1, 1 + 2 ** -9])
  })

  it("round-trips arbitrary tensor maps (fast-check), byte for byte on re-encode", () => {
    const shape = fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 })
    const size = (s: number[]) => s.reduce((a, b) => a * b, 1)
    const sized = <T>(make: (n: number) => fc.Arbitrary<T>) =>
      shape.chain((s) => make(size(s)).map((data) => ({ shape: s, data })))
    const f32 = (n: number) => fc.float32Array({ minLength: n, maxLength: n })
    const tensor: fc.Arbitrary<Tensor> = fc.oneof(
      sized((n) => fc.float64Array({ minLength: n, maxLength: n })).map((x) => ({
        dtype: "F64" as const,
        ...x,
      })),
      sized(f32).map((x) => ({ dtype: "F32" as const, ...x })),
      sized(f32).map((x) => ({ dtype: "BF16" as const, ...x })),
      sized((n) => fc.float32Array({ minLength: n, maxLength: n, noNaN: true })).map((x) => ({
        dtype: "F16" as const,
        ...x,
      })),
      sized((n) => fc.bigInt64Array({ minLength: n, maxLength: n })).map((x) => ({
        dtype: "I64" as const,
        ...x,
      })),
      sized((n) => fc.int32Array({ minLength: n, maxLength: n })).map((x) => ({
        dtype: "I32" as const,
        ...x,
      })),
      sized((n) => fc.uint16Array({ minLength: n, maxLength: n })).map((x) => ({
        dtype: "U16" as const,
        ...x,
      })),
      sized((n) => fc.uint8Array({ minLength: n, maxLength: n })).map((x) => ({
        dtype: "U8" as const,
        ...x,
      })),
    )
    const names = fc.string({ minLength: 1, maxLength: 12 }).filter((s) => s !== "__metadata__")
    const tensorMap = fc.uniqueArray(fc.tuple(names, tensor), {
      maxLength: 6,
      selector: ([n]) => n,
    })
    const metadata = fc.option(fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }), {
      nil: undefined,
    })

    fc.assert(
      fc.property(tensorMap, metadata, (entries, meta) => {
        const input = new Map(entries)
        const bytes = encodeSafetensors(input, meta)
        const { tensors, metadata: back } = decodeSafetensors(bytes)
        expect(back).toEqual(meta ?? {})
        expect(tensors.size).toBe(input.size)
        for (const [name, t] of input) {
          const got = tensors.get(name)
          expect(got?.dtype).toBe(t.dtype)
          expect(got?.shape).toEqual(t.shape)
          const want =
            t.dtype === "BF16"
              ? bf16Round(t.data)
              : t.dtype === "F16"
                ? f16BitsToF32(f32ToF16Bits(t.data))
                : t.data
          expect(bytesOf(got?.data ?? new Uint8Array())).toEqual(bytesOf(want))
        }
        expect(encodeSafetensors(tensors, meta)).toEqual(bytes)
      }),
    )
  })
})

describe("decodeSafetensors refuses corrupt files", () => {
  const f32x2 = bytesOf(new Float32Array([1, 2]))
  const entry = (dtype: string, shape: number[], offsets: number[]) => ({
    dtype,
    shape,
    data_offsets: offsets,
  })

  it("truncated before the header length", () => {
    expect(decodeError(new Uint8Array([1, 0, 0]))).toBe(
      "safetensors: header length: truncated: 3 bytes, fewer than the 8-byte header length",
    )
  })

  it("header length larger than the file", () => {
    const bytes = new Uint8Array(20)
    bytes[0] = 100
    expect(decodeError(bytes)).toBe(
      "safetensors: header length: 100 bytes runs past the end of the file (20 bytes, so at most 12)",
    )
  })

  it("header over 100 MB", () => {
    const bytes = new Uint8Array(16)
    new DataView(bytes.buffer).setBigUint64(0, BigInt(MAX_HEADER_BYTES + 1), true)
    expect(decodeError(bytes)).toBe(
      "safetensors: header length: 100000001 bytes exceeds the 100000000-byte limit",
    )
    new DataView(bytes.buffer).setBigUint64(0, 2n ** 64n - 1n, true)
    expect(decodeError(bytes)).toContain("18446744073709551615 bytes exceeds")
  })

  it("invalid JSON, invalid UTF-8, a non-object header", () => {
    expect(decodeError(file('{"a": '))).toMatch(/^safetensors: header JSON: is not valid JSON \(/)
    const badUtf8 = file("{}      ")
    badUtf8[9] = 0xff
    expect(decodeError(badUtf8)).toBe("safetensors: header JSON: is not valid UTF-8")
    expect(decodeError(file("[1,2]"))).toBe("safetensors: header JSON: is not an object")
  })

  it("unknown dtype", () => {
    expect(decodeError(file({ w: entry("F8_E4M3", [2], [0, 2]) }, [0, 0]))).toBe(
      'safetensors: tensor "w" dtype: unknown dtype "F8_E4M3"',
    )
  })

  it("shape and offsets disagree", () => {
    expect(decodeError(file({ w: entry("F32", [3], [0, 8]) }, f32x2))).toBe(
      'safetensors: tensor "w" data_offsets: shape [3] F32 needs 12 bytes, data_offsets [0,8] span 8',
    )
  })

  it("bad shape, bad offsets", () => {
    expect(decodeError(file({ w: entry("F32", [-1], [0, 8]) }, f32x2))).toBe(
      'safetensors: tensor "w" shape: dimension -1 is not a non-negative integer',
    )
    expect(decodeError(file({ w: entry("F32", [2], [0]) }, f32x2))).toBe(
      'safetensors: tensor "w" data_offsets: expected [begin, end] of non-negative integers, got [0]',
    )
    expect(decodeError(file({ w: entry("F32", [0], [8, 0]) }, f32x2))).toBe(
      'safetensors: tensor "w" data_offsets: end 0 is before begin 8',
    )
    expect(decodeError(file({ w: { dtype: "F32", shape: [2] } }, f32x2))).toBe(
      'safetensors: tensor "w" data_offsets: expected [begin, end] of non-negative integers, got undefined',
    )
    expect(decodeError(file({ w: 3 }, f32x2))).toBe('safetensors: tensor "w": is not an object')
  })

  it("overlapping offsets", () => {
    const header = { a: entry("F32", [2], [0, 8]), b: entry("F32", [1], [4, 8]) }
    expect(decodeError(file(header, f32x2))).toBe(
      'safetensors: tensor "b" data_offsets: [4,8] overlaps tensor "a" [0,8]',
    )
  })

  it("offsets past the data section", () => {
    expect(decodeError(file({ a: entry("F32", [2], [0, 8]) }, [0, 0, 0, 0]))).toBe(
      'safetensors: tensor "a" data_offsets: [0,8] is out of range: the data section is 4 bytes',
    )
  })

  it("non-contiguous data (a gap)", () => {
    const header = { a: entry("F32", [1], [0, 4]), b: entry("F32", [1], [8, 12]) }
    expect(decodeError(file(header, [...f32x2, 0, 0, 0, 0]))).toBe(
      'safetensors: tensor "b" data_offsets: [8,12] leaves a gap after byte 4: tensor data must be contiguous',
    )
    expect(decodeError(file({ b: entry("F32", [1], [4, 8]) }, f32x2))).toBe(
      'safetensors: tensor "b" data_offsets: [4,8] leaves a gap after byte 0: tensor data must be contiguous',
    )
  })

  it("trailing bytes after the last tensor", () => {
    expect(decodeError(file({ a: entry("F32", [1], [0, 4]) }, f32x2))).toBe(
      "safetensors: data: the tensors cover 4 bytes but the data section is 8: 4 trailing bytes",
    )
  })

  it("bad metadata and BOOL values", () => {
    expect(decodeError(file({ __metadata__: { step: 3 } }))).toBe(
      "safetensors: __metadata__.step: metadata values must be strings, got 3",
    )
    expect(decodeError(file({ __metadata__: [] }))).toBe(
      "safetensors: __metadata__: is not an object",
    )
    expect(decodeError(file({ m: entry("BOOL", [2], [0, 2]) }, [1, 2]))).toBe(
      'safetensors: tensor "m" data: BOOL element 1 is 2, not 0 or 1',
    )
  })
})

describe("encodeSafetensors refuses bad tensors", () => {
  const encodeError = (name: string, t: Tensor): string =>
    errorOf(() => encodeSafetensors(new Map([[name, t]]))).message

  it("data length that does not match the shape", () => {
    expect(encodeError("w", { dtype: "F32", shape: [2, 2], data: new Float32Array(3) })).toBe(
      'safetensors: tensor "w" shape: shape [2,2] has 4 elements, data has 3',
    )
  })

  it("the wrong array for the dtype", () => {
    const wrong = { dtype: "F32", shape: [1], data: new Float64Array(1) } as unknown as Tensor
    expect(encodeError("w", wrong)).toBe(
      'safetensors: tensor "w" data: dtype F32 needs a Float32Array, got Float64Array',
    )
  })

  it("an unknown dtype, a reserved name, a non-integer dimension", () => {
    const unknown = { dtype: "Q4", shape: [1], data: new Uint8Array(1) } as unknown as Tensor
    expect(encodeError("w", unknown)).toBe('safetensors: tensor "w" dtype: unknown dtype "Q4"')
    expect(encodeError("__metadata__", { dtype: "U8", shape: [0], data: new Uint8Array(0) })).toBe(
      'safetensors: tensor "__metadata__": __metadata__ is reserved for metadata',
    )
    expect(encodeError("w", { dtype: "U8", shape: [1.5], data: new Uint8Array(1) })).toBe(
      'safetensors: tensor "w" shape: dimension 1.5 is not a non-negative integer',
    )
  })

  it("non-string metadata", () => {
    const meta = { step: 3 } as unknown as Record<string, string>
    expect(errorOf(() => encodeSafetensors(new Map(), meta)).message).toBe(
      "safetensors: __metadata__.step: metadata values must be strings, got number",
    )
  })

  it("writes an empty file for no tensors", () => {
    expect([...encodeSafetensors(new Map())]).toEqual([
      8, 0, 0, 0, 0, 0, 0, 0, 0x7b, 0x7d, 32, 32, 32, 32, 32, 32,
    ])
    expect(decodeSafetensors(encodeSafetensors(new Map())).tensors.size).toBe(0)
  })
})

const dtypes: Dtype[] = [
  "F64",
  "F32",
  "F16",
  "BF16",
  "I64",
  "I32",
  "I16",
  "I8",
  "U64",
  "U32",
  "U16",
  "U8",
  "BOOL",
]
it("the every-dtype fixture covers every dtype", () => {
  expect(new Set(everyDtype.map(([, t]) => t.dtype))).toEqual(new Set(dtypes))
})
