import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import * as tar from "tar-stream"
import { collectBytes } from "../../../services/tar/index.ts"

/** The user a sandbox's shell runs as, in numbers: what files put into it are owned by. */
export interface Owner {
  readonly uid: number
  readonly gid: number
}

/** A tar holding one empty directory (mode 0755) owned by `owner`. */
export const directoryArchive = (name: string, owner: Owner): Promise<Buffer> => {
  const pack = tar.pack()
  pack.entry({ name: `${name}/`, type: "directory", mode: 0o755, ...owner })
  pack.finalize()
  return collectBytes(pack)
}

/**
 * The same archive with every entry owned by `owner`. The engine keeps the ownership written in
 * the archive (its copyUIDGID option resolves user names on the host, not in the container).
 */
export const reownArchive = async (archive: Uint8Array, owner: Owner): Promise<Buffer> => {
  const extract = tar.extract()
  const pack = tar.pack()
  const packed = collectBytes(pack)
  const rewrite = (async () => {
    for await (const entry of extract) {
      const header = { ...entry.header, ...owner, uname: "", gname: "" }
      await pipeline(entry, pack.entry(header))
    }
    pack.finalize()
  })()
  try {
    await Promise.all([
      pipeline(
        Readable.from([Buffer.from(archive.buffer, archive.byteOffset, archive.byteLength)]),
        extract,
      ),
      rewrite,
    ])
  } catch (error) {
    pack.destroy()
    await packed.catch(() => undefined)
    throw error
  }
  return packed
}
