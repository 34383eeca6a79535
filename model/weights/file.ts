import { readFile, rename, rm, writeFile } from "node:fs/promises"
import type { Tensor } from "./dtypes.ts"
import { SafetensorsError } from "./errors.ts"
import { decodeSafetensors, encodeSafetensors, type Safetensors } from "./safetensors.ts"

const withPath = (e: unknown, path: string): unknown =>
  e instanceof SafetensorsError
    ? new SafetensorsError({ field: e.field, reason: e.reason, path })
    : e

const ioError = (e: unknown, path: string, operation: string): SafetensorsError =>
  new SafetensorsError({
    field: "file",
    reason: `cannot ${operation}: ${e instanceof Error ? e.message : String(e)}`,
    path,
  })

/**
 * Write `tensors` to `path` as safetensors (see encodeSafetensors). Written to a temporary file
 * beside it and renamed into place, so a reader never sees a half-written checkpoint.
 * Rejects with SafetensorsError.
 */
export async function writeSafetensorsFile(
  path: string,
  tensors: ReadonlyMap<string, Tensor>,
  metadata?: Readonly<Record<string, string>>,
): Promise<void> {
  let bytes: Uint8Array
  try {
    bytes = encodeSafetensors(tensors, metadata)
  } catch (e) {
    throw withPath(e, path)
  }
  const temporary = `${path}.${process.pid}.${Date.now()}.tmp`
  try {
    await writeFile(temporary, bytes)
    await rename(temporary, path)
  } catch (e) {
    await rm(temporary, { force: true })
    throw ioError(e, path, "write")
  }
}

/**
 * Read and check a safetensors file (see decodeSafetensors; the aligned tensors are views into
 * the file's buffer). Rejects with SafetensorsError whose message names the file.
 */
export async function readSafetensorsFile(path: string): Promise<Safetensors> {
  let bytes: Uint8Array
  try {
    bytes = await readFile(path)
  } catch (e) {
    throw ioError(e, path, "read")
  }
  try {
    return decodeSafetensors(bytes)
  } catch (e) {
    throw withPath(e, path)
  }
}
