import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Tensor } from "./dtypes.ts"
import { SafetensorsError } from "./errors.ts"
import { readSafetensorsFile, writeSafetensorsFile } from "./file.ts"
import { encodeSafetensors } from "./safetensors.ts"

describe("safetensors files", () => {
  let dir = ""
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "t1-safetensors-"))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  const tensors = new Map<string, Tensor>([
    ["embed", { dtype: "F32", shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) }],
    ["step", { dtype: "I64", shape: [], data: new BigInt64Array([12n]) }],
  ])

  it("writes the encoded bytes and reads them back, leaving no temporary file", async () => {
    const path = join(dir, "model.safetensors")
    await writeSafetensorsFile(path, tensors, { note: "x" })
    expect(new Uint8Array(await readFile(path))).toEqual(encodeSafetensors(tensors, { note: "x" }))
    expect(await readdir(dir)).toEqual(["model.safetensors"])
    const back = await readSafetensorsFile(path)
    expect(back.metadata).toEqual({ note: "x" })
    expect(back.tensors.get("embed")).toEqual(tensors.get("embed"))
    expect(back.tensors.get("step")?.data).toEqual(new BigInt64Array([12n]))
  })

  it("names the file in format errors", async () => {
    const path = join(dir, "broken.safetensors")
    await writeFile(path, new Uint8Array([1, 2, 3]))
    const err = await readSafetensorsFile(path).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(SafetensorsError)
    expect((err as SafetensorsError).message).toBe(
      `${path}: header length: truncated: 3 bytes, fewer than the 8-byte header length`,
    )
  })

  it("reports a missing file as a SafetensorsError", async () => {
    const path = join(dir, "missing.safetensors")
    const err = await readSafetensorsFile(path).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(SafetensorsError)
    expect((err as SafetensorsError).message).toMatch(/: file: cannot read: ENOENT/)
  })

  it("names the file when the tensors cannot be encoded, and writes nothing", async () => {
    const path = join(dir, "bad.safetensors")
    const bad = new Map<string, Tensor>([
      ["w", { dtype: "F32", shape: [2], data: new Float32Array(1) }],
    ])
    const err = await writeSafetensorsFile(path, bad).catch((e: unknown) => e)
    expect((err as SafetensorsError).message).toBe(
      `${path}: tensor "w" shape: shape [2] has 2 elements, data has 1`,
    )
    expect(await readdir(dir)).not.toContain("bad.safetensors")
  })
})
