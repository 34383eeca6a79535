/**
 * What this process's heap holds, for leak tests: a full garbage collection, then a V8 heap
 * snapshot counted by constructor (objects) and function name (closures).
 */
import { getHeapSnapshot, setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

/** Collects garbage until the used heap stops shrinking (weak callbacks run in between). */
export const collectGarbage = async (): Promise<void> => {
  for (let i = 0; i < 4; i++) {
    gc()
    await new Promise((resolve) => setImmediate(resolve))
  }
}

interface Snapshot {
  readonly snapshot: {
    readonly meta: {
      readonly node_fields: ReadonlyArray<string>
      readonly node_types: ReadonlyArray<ReadonlyArray<string> | string>
    }
  }
  readonly nodes: ReadonlyArray<number>
  readonly strings: ReadonlyArray<string>
}

const readSnapshot = (): Promise<Snapshot> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    const stream = getHeapSnapshot()
    stream.on("data", (c: Buffer) => chunks.push(c))
    stream.once("error", reject)
    stream.once("end", () => resolve(JSON.parse(Buffer.concat(chunks).toString("utf8"))))
  })

/** Live objects and closures by name ("object:Foo", "closure:bar") after a full collection. */
export const heapCounts = async (): Promise<Map<string, number>> =>
  new Map(
    [...(await heapCensus()).entries()]
      .filter(([name]) => name.startsWith("object:") || name.startsWith("closure:"))
      .map(([name, c]) => [name, c.count]),
  )

/**
 * Every live node after a full collection by type and name ("object:Foo", "closure:bar",
 * "array:(object elements)", "string:…" pooled as "string"): how many and their own bytes.
 */
export const heapCensus = async (): Promise<Map<string, { count: number; bytes: number }>> => {
  await collectGarbage()
  const s = await readSnapshot()
  const fields = s.snapshot.meta.node_fields
  const types = s.snapshot.meta.node_types[0] as ReadonlyArray<string>
  const width = fields.length
  const typeAt = fields.indexOf("type")
  const nameAt = fields.indexOf("name")
  const sizeAt = fields.indexOf("self_size")
  const census = new Map<string, { count: number; bytes: number }>()
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + typeAt] as number] ?? "?"
    const named = type === "object" || type === "closure" || type === "array" || type === "native"
    const key = named ? `${type}:${s.strings[s.nodes[i + nameAt] as number]}` : type
    const entry = census.get(key) ?? { count: 0, bytes: 0 }
    entry.count++
    entry.bytes += s.nodes[i + sizeAt] as number
    census.set(key, entry)
  }
  return census
}

/** Names whose count grew by at least `min` from `before` to `after`, largest growth first. */
export const grownBy = (
  before: ReadonlyMap<string, number>,
  after: ReadonlyMap<string, number>,
  min: number,
): Array<{ readonly name: string; readonly before: number; readonly after: number }> =>
  [...after]
    .map(([name, n]) => ({ name, before: before.get(name) ?? 0, after: n }))
    .filter((g) => g.after - g.before >= min)
    .sort((a, b) => b.after - b.before - (a.after - a.before))
