import { lstat, readdir, readFile, readlink } from "node:fs/promises"
import { join, posix } from "node:path"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import * as tar from "tar-stream"
import { collectBytes } from "./bytes.ts"

/** A file tree as a tar archive, and what the verifier needs to know about its contents. */
export interface TestsArchive {
  readonly tar: Uint8Array
  /** Regular files by their path inside the tree (no leading "./"). */
  readonly files: ReadonlySet<string>
  /** The contents of the file at `name`, if the archive holds one there. */
  readonly read: (name: string) => Promise<Uint8Array | undefined>
}

const normalName = (name: string) => posix.normalize(name.replace(/^\.?\/+/, "")).replace(/\/$/, "")

/** Calls `visit` with each entry of `archive` and its contents (for regular files). */
const eachEntry = async (
  archive: Uint8Array,
  visit: (header: tar.Header, body: Buffer | undefined) => void,
): Promise<void> => {
  const extract = tar.extract()
  const reading = (async () => {
    for await (const entry of extract) {
      const body = await collectBytes(entry)
      visit(entry.header, entry.header.type === "file" ? body : undefined)
    }
  })()
  await Promise.all([
    pipeline(
      Readable.from([Buffer.from(archive.buffer, archive.byteOffset, archive.byteLength)]),
      extract,
    ),
    reading,
  ])
}

/** Reads an archive that arrived from elsewhere (a request, the object store). */
export const openArchive = async (archive: Uint8Array): Promise<TestsArchive> => {
  const files = new Set<string>()
  await eachEntry(archive, (header) => {
    if (header.type === "file") files.add(normalName(header.name))
  })
  return {
    tar: archive,
    files,
    read: async (name) => {
      let found: Uint8Array | undefined
      await eachEntry(archive, (header, body) => {
        if (body !== undefined && normalName(header.name) === name) found = body
      })
      return found
    },
  }
}

/**
 * Packs the directory `dir` (files, directories and symlinks as they are, modes kept, owned by
 * root) and, when `extra` names a file that the tree lacks, that file too — TB1's run-tests.sh
 * lives beside tests/, not in it. Throws when `dir` is not a readable directory.
 */
export const packDirectory = async (
  dir: string,
  extra?: { readonly name: string; readonly path: string },
): Promise<TestsArchive> => {
  const pack = tar.pack()
  const packed = collectBytes(pack)
  const files = new Map<string, Buffer>()
  const add = (header: Partial<tar.Header> & { readonly name: string }, body?: Buffer) =>
    new Promise<void>((resolve, reject) => {
      const done = (error?: Error | null) => (error ? reject(error) : resolve())
      const full = { uid: 0, gid: 0, ...header }
      if (body === undefined) pack.entry(full, done)
      else pack.entry(full, body, done)
    })
  const walk = async (hostDir: string, prefix: string): Promise<void> => {
    const entries = (await readdir(hostDir)).sort()
    for (const name of entries) {
      const path = join(hostDir, name)
      const inside = prefix === "" ? name : `${prefix}/${name}`
      const stat = await lstat(path)
      const mode = stat.mode & 0o7777
      if (stat.isDirectory()) {
        await add({ name: `${inside}/`, type: "directory", mode })
        await walk(path, inside)
      } else if (stat.isSymbolicLink()) {
        await add({ name: inside, type: "symlink", linkname: await readlink(path), mode })
      } else if (stat.isFile()) {
        const body = await readFile(path)
        files.set(inside, body)
        await add({ name: inside, type: "file", mode }, body)
      }
    }
  }
  try {
    if (!(await lstat(dir)).isDirectory()) throw new Error(`${dir} is not a directory`)
    await walk(dir, "")
    if (extra !== undefined && !files.has(extra.name)) {
      const body = await readFile(extra.path)
      files.set(extra.name, body)
      await add({ name: extra.name, type: "file", mode: 0o755 }, body)
    }
    pack.finalize()
  } catch (error) {
    pack.destroy()
    await packed.catch(() => undefined)
    throw error
  }
  const archive = new Uint8Array(await packed)
  return { tar: archive, files: new Set(files.keys()), read: async (name) => files.get(name) }
}

/** A tar holding one regular file. */
export const singleFileTar = async (name: string, body: Uint8Array): Promise<Uint8Array> => {
  const pack = tar.pack()
  const packed = collectBytes(pack)
  pack.entry({ name, type: "file", mode: 0o600, uid: 0, gid: 0 }, Buffer.from(body))
  pack.finalize()
  return new Uint8Array(await packed)
}

/**
 * `archive` with `files` laid over it, as one archive: an entry of `archive` at a path one of
 * `files` names is left out (tar would replace it on unpacking anyway), the files are added
 * after the rest with `mode`, owned by root. One upload instead of two: each is a process in the
 * sandbox, and on docker a helper process of the engine besides.
 */
export const overlayFiles = async (
  archive: Uint8Array,
  files: ReadonlyArray<{ readonly path: string; readonly bytes: Uint8Array }>,
  mode = 0o600,
): Promise<Uint8Array> => {
  const replaced = new Set(files.map((f) => normalName(f.path)))
  const pack = tar.pack()
  const packed = collectBytes(pack)
  const add = (header: Partial<tar.Header> & { readonly name: string }, body?: Buffer) =>
    new Promise<void>((resolve, reject) => {
      const done = (error?: Error | null) => (error ? reject(error) : resolve())
      if (body === undefined) pack.entry(header, done)
      else pack.entry(header, body, done)
    })
  const kept: Array<{ header: tar.Header; body: Buffer | undefined }> = []
  await eachEntry(archive, (header, body) => {
    if (!replaced.has(normalName(header.name))) kept.push({ header, body })
  })
  try {
    for (const { header, body } of kept) await add(header, body)
    for (const f of files)
      await add(
        { name: f.path, type: "file", mode, uid: 0, gid: 0, size: f.bytes.byteLength },
        Buffer.from(f.bytes),
      )
    pack.finalize()
  } catch (error) {
    pack.destroy()
    await packed.catch(() => undefined)
    throw error
  }
  return new Uint8Array(await packed)
}
