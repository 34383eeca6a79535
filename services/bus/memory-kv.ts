import type { KvEntry } from "./bus.ts"
import { subjectMatches } from "./subjects.ts"

/** A KV bucket in one process: revisions are per bucket, as NATS KV's stream sequences are. */
export class MemoryKvBucket {
  private readonly entries = new Map<string, KvEntry>()
  private readonly watchers = new Set<{ pattern: string; push: (e: KvEntry) => void }>()
  private revision = 0

  constructor(readonly name: string) {}

  get(key: string): KvEntry | undefined {
    const e = this.entries.get(key)
    return e === undefined || e.operation === "delete" ? undefined : e
  }

  /** Current revision of a key, 0 when it never existed or was deleted. */
  revisionOf(key: string): number {
    const e = this.entries.get(key)
    return e === undefined || e.operation === "delete" ? 0 : e.revision
  }

  write(key: string, value: Uint8Array, operation: KvEntry["operation"]): number {
    const entry: KvEntry = { key, value: value.slice(), revision: ++this.revision, operation }
    this.entries.set(key, entry)
    for (const w of this.watchers) if (subjectMatches(w.pattern, key)) w.push(entry)
    return entry.revision
  }

  keys(): string[] {
    return [...this.entries.values()].filter((e) => e.operation === "put").map((e) => e.key)
  }

  /** Pushes the current values first, then every change; returns the unwatch function. */
  watch(pattern: string, push: (e: KvEntry) => void): () => void {
    const current = [...this.entries.values()]
      .filter((e) => e.operation === "put" && subjectMatches(pattern, e.key))
      .sort((a, b) => a.revision - b.revision)
    for (const e of current) push(e)
    const watcher = { pattern, push }
    this.watchers.add(watcher)
    return () => {
      this.watchers.delete(watcher)
    }
  }
}
