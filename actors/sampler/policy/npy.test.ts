import { describe, expect, it } from "vitest"
import { parseNpy } from "./npy.ts"

const npy = (version: 1 | 2, dict: string, data: Uint8Array): Uint8Array => {
  const lengthBytes = version === 1 ? 2 : 4
  const prefix = 6 + 2 + lengthBytes
  const header = `${dict.padEnd(Math.ceil((prefix + dict.length + 1) / 64) * 64 - prefix - 1, " ")}\n`
  const out = Buffer.alloc(prefix + header.length + data.byteLength)
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, version, 0]).copy(out)
  if (version === 1) out.writeUInt16LE(header.length, 8)
  else out.writeUInt32LE(header.length, 8)
  out.write(header, prefix, "latin1")
  Buffer.from(data).copy(out, prefix + header.length)
  return out
}

describe("parseNpy", () => {
  it("reads a version 2 header and int64 values", () => {
    const data = new Uint8Array(new BigInt64Array([3n, 1n, 4n]).buffer)
    const array = parseNpy(
      npy(2, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", data),
      "x",
    )
    expect(array).toEqual({ dtype: "int64", shape: [3], values: Float64Array.from([3, 1, 4]) })
  })

  it("rejects big-endian data, Fortran order and a shape the data does not fill", () => {
    const four = new Uint8Array(8)
    expect(() =>
      parseNpy(npy(1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", four), "x"),
    ).toThrow("unsupported .npy dtype >i4")
    expect(() =>
      parseNpy(npy(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2,), }", four), "x"),
    ).toThrow("not in C order")
    expect(() =>
      parseNpy(npy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", four), "x"),
    ).toThrow("needs 3 values, data holds 2")
  })

  it("rejects bytes that are not .npy", () => {
    expect(() => parseNpy(new Uint8Array(16), "choices[0].routed_experts")).toThrow(
      "choices[0].routed_experts: expected a .npy array",
    )
  })
})
