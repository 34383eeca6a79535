import { readdir, readFile, rename, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { Result, Schema } from "effect"
import type { SandboxInfo } from "../driver.ts"

/**
 * meta.json in each sandbox directory: enough for any later process (a restarted sandbox actor,
 * a reaper) to list the sandbox with its labels and expiry and to kill what it left running.
 */
export const SandboxMeta = Schema.Struct({
  version: Schema.Literal(1),
  id: Schema.String,
  labels: Schema.Record(Schema.String, Schema.String),
  createdAtMs: Schema.Number,
  expiresAtMs: Schema.Number,
  /** The workdir as the sandbox sees it ("" = the sandbox directory). */
  workdir: Schema.String,
  /** The namespace holder process and its start time (so a reused pid is never killed). */
  holder: Schema.NullOr(Schema.Struct({ pid: Schema.Number, startTime: Schema.String })),
  /** The sandbox's cgroup directories (empty where cgroups are not available). */
  cgroups: Schema.Array(Schema.String),
})
export type SandboxMeta = typeof SandboxMeta.Type

export const META_FILE = "meta.json"

const decode = Schema.decodeUnknownResult(Schema.fromJsonString(SandboxMeta))

/** Writes atomically (rename), so a reader never sees half a file. */
export const writeMeta = async (dir: string, meta: SandboxMeta): Promise<void> => {
  const tmp = join(dir, `.${META_FILE}.tmp`)
  await writeFile(tmp, JSON.stringify(meta, null, 2))
  await rename(tmp, join(dir, META_FILE))
}

/** The sandbox's metadata, or undefined when missing or unreadable (e.g. being created). */
export const readMeta = async (dir: string): Promise<SandboxMeta | undefined> => {
  const text = await readFile(join(dir, META_FILE), "utf8").catch(() => undefined)
  if (text === undefined) return undefined
  const decoded = decode(text)
  return Result.isSuccess(decoded) ? decoded.success : undefined
}

/**
 * The sandboxes whose directories under `root` have names of `idShape` and readable metadata,
 * oldest first: what a driver's `list` answers, whichever process made them.
 */
export const listSandboxes = async (root: string, idShape: RegExp): Promise<SandboxInfo[]> => {
  const infos: SandboxInfo[] = []
  for (const entry of await readdir(root).catch(() => [])) {
    if (!idShape.test(entry)) continue
    const meta = await readMeta(join(root, entry))
    if (meta === undefined) continue
    const { id, labels, createdAtMs, expiresAtMs } = meta
    infos.push({ id, labels, createdAtMs, expiresAtMs })
  }
  return infos.sort((a, b) => a.createdAtMs - b.createdAtMs)
}
