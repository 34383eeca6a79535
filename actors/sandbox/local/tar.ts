import { createReadStream } from "node:fs"
import {
  link,
  lstat,
  mkdir,
  open,
  readdir,
  readlink,
  realpath,
  rm,
  symlink,
  utimes,
} from "node:fs/promises"
import { join, posix, sep } from "node:path"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import * as tar from "tar-stream"
import { FileTransferError } from "../errors.ts"

/**
 * put and get for the local driver. Nothing an archive holds may land outside its target
 * directory, and nothing outside the sandbox directory is read: names whose `..` climb out,
 * hard links to outside, and paths that go through a symlink resolving outside are all
 * FileTransferError. Symlink entries are created as they are; an existing file at an entry's
 * name is replaced, never written through.
 */

const isWithin = (path: string, dir: string) => path === dir || path.startsWith(dir + sep)

class Refused extends Error {}

/**
 * The directory transfers resolve paths under: `dir` itself, unless it is a view into a process's
 * mount namespace (`/proc/<pid>/root`), whose real path would name this host's root instead.
 */
const baseOf = (dir: string) => (/^\/proc\/\d+\/root$/.test(dir) ? dir : realpath(dir))

/**
 * Walks (and, with `create`, makes) the directories `parts` below `root`. A symlink on the way
 * is followed only when it resolves inside `root`. Returns the real path reached.
 */
const walkDirs = async (root: string, parts: ReadonlyArray<string>, create: boolean) => {
  let at = root
  for (const part of parts) {
    const next = join(at, part)
    const stat = await lstat(next).catch(() => undefined)
    if (stat === undefined) {
      if (!create) throw new Refused("no such file or directory")
      await mkdir(next)
      at = next
    } else if (stat.isSymbolicLink()) {
      const real = await realpath(next).catch(() => undefined)
      if (real === undefined || !isWithin(real, root))
        throw new Refused(`${part} is a symlink that leads outside`)
      if (!(await lstat(real)).isDirectory()) throw new Refused(`${part} is not a directory`)
      at = real
    } else if (stat.isDirectory()) {
      at = next
    } else {
      throw new Refused(`${part} is not a directory`)
    }
  }
  return at
}

/** The entry's name as path parts below the target, or a refusal. */
const entryParts = (name: string): string[] => {
  const normal = posix.normalize(name.replace(/^\/+/, ""))
  if (normal === ".." || normal.startsWith("../")) throw new Refused(`${name} escapes the target`)
  return normal.split("/").filter((p) => p !== "" && p !== ".")
}

const reason = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** Unpacks `archive` into `sandboxDir`/`targetParts` (made if missing). */
export const extractTar = async (
  archive: Uint8Array,
  sandboxDir: string,
  targetParts: ReadonlyArray<string>,
  shownPath: string,
): Promise<void> => {
  try {
    const sandboxRoot = await baseOf(sandboxDir)
    const root = await walkDirs(sandboxRoot, targetParts, true)
    const extract = tar.extract()
    const feeding = pipeline(Readable.from([Buffer.from(archive)]), extract)
    feeding.catch(() => undefined)
    for await (const entry of extract) {
      const { header } = entry
      const parts = entryParts(header.name)
      const type = header.type ?? "file"
      const last = parts[parts.length - 1]
      if (last === undefined) {
        entry.resume()
        continue
      }
      const parent = await walkDirs(root, parts.slice(0, -1), true)
      const dest = join(parent, last)
      const mode = (header.mode ?? 0o644) & 0o7777
      const existing = await lstat(dest).catch(() => undefined)
      if (type === "directory") {
        if (existing?.isDirectory() !== true) {
          if (existing !== undefined) await rm(dest, { recursive: true })
          await mkdir(dest, { mode })
        }
        entry.resume()
        continue
      }
      if (existing !== undefined) await rm(dest, { recursive: true })
      if (type === "file" || type === "contiguous-file") {
        const file = await open(dest, "wx", mode)
        try {
          for await (const piece of entry) await file.write(piece as Buffer)
          await file.chmod(mode)
        } finally {
          await file.close()
        }
      } else if (type === "symlink") {
        await symlink(header.linkname ?? "", dest)
        entry.resume()
      } else if (type === "link") {
        const source = await realpath(join(root, ...entryParts(header.linkname ?? ""))).catch(
          () => undefined,
        )
        if (source === undefined || !isWithin(source, root))
          throw new Refused(`hard link ${header.name} points outside the target`)
        await link(source, dest)
        entry.resume()
      } else {
        throw new Refused(`${header.name}: unsupported entry type ${type}`)
      }
      if (header.mtime !== undefined && type !== "symlink")
        await utimes(dest, header.mtime, header.mtime).catch(() => undefined)
    }
    await feeding
  } catch (e) {
    throw new FileTransferError({ path: shownPath, reason: reason(e) })
  }
}

/**
 * A tar of `sandboxDir`/`parts` (a file, a directory, or a symlink, not followed), its entries
 * named from the path's last component (`rootName` for the sandbox directory itself), as
 * `docker cp` does.
 */
export const packPath = async (
  sandboxDir: string,
  parts: ReadonlyArray<string>,
  shownPath: string,
  rootName: string,
): Promise<Uint8Array> => {
  const pack = tar.pack()
  const chunks: Buffer[] = []
  const collecting = (async () => {
    for await (const chunk of pack) chunks.push(chunk as Buffer)
  })()
  const add = async (path: string, name: string): Promise<void> => {
    const stat = await lstat(path)
    const common = { mode: stat.mode & 0o7777, mtime: stat.mtime }
    if (stat.isDirectory()) {
      pack.entry({ ...common, name: `${name}/`, type: "directory" })
      for (const child of (await readdir(path)).sort())
        await add(join(path, child), `${name}/${child}`)
    } else if (stat.isSymbolicLink()) {
      pack.entry({ ...common, name, type: "symlink", linkname: await readlink(path) })
    } else if (stat.isFile()) {
      const entry = pack.entry({ ...common, name, type: "file", size: stat.size })
      await pipeline(createReadStream(path), entry)
    }
    // Sockets, fifos and devices are left out.
  }
  try {
    const sandboxRoot = await baseOf(sandboxDir)
    const parent = await walkDirs(sandboxRoot, parts.slice(0, -1), false)
    const last = parts[parts.length - 1]
    if (last === undefined) await add(sandboxRoot, rootName)
    else await add(join(parent, last), last)
    pack.finalize()
    await collecting
  } catch (e) {
    pack.destroy()
    await collecting.catch(() => undefined)
    const missing = (e as NodeJS.ErrnoException).code === "ENOENT"
    throw new FileTransferError({
      path: shownPath,
      reason: missing ? "no such file or directory" : reason(e),
    })
  }
  return new Uint8Array(Buffer.concat(chunks))
}
