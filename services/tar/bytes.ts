import tar from "tar-stream"

/** All bytes a tar-stream pack (or any byte stream) yields, in one buffer. */
export const collectBytes = async (stream: AsyncIterable<unknown>): Promise<Buffer> => {
  const chunks: Buffer[] = []
  for await (const chunk of stream) {
    if (!(chunk instanceof Uint8Array)) throw new Error("a tar stream yielded a non-byte chunk")
    chunks.push(Buffer.from(chunk))
  }
  return Buffer.concat(chunks)
}

/** A tar holding the given files at its top level, each with `mode`. */
export const packFiles = (
  files: Readonly<Record<string, string | Uint8Array>>,
  mode = 0o644,
): Promise<Buffer> => {
  const pack = tar.pack()
  for (const [name, body] of Object.entries(files)) {
    pack.entry({ name, mode }, typeof body === "string" ? body : Buffer.from(body))
  }
  pack.finalize()
  return collectBytes(pack)
}
