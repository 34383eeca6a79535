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

/** Live objects and closures by name ("Object:Foo", "closure:bar") after a full collection. */
export const heapCounts = async (): Promise<Map<string, number>> => {
  await collectGarbage()
  const s = await readSnapshot()
  const fields = s.snapshot.meta.node_fields
  const types = s.snapshot.meta.node_types[0] as ReadonlyArray<string>
  const width = fields.length
  const typeAt = fields.indexOf("type")
  const nameAt = fields.indexOf("name")
  const counts = new Map<string, number>()
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + typeAt] as number]
    if (type !== "object" && type !== "closure") continue
    const key = `${type}:${s.strings[s.nodes[i + nameAt] as number]}`
    counts.set(key, (counts.get(key) ?? 0) + 1)
  }
  return counts
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
