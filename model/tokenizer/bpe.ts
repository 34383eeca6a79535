import { PairMinHeap } from "./heap.ts"

/** Token ids must stay below this so a pair of ids packs into one exact double. */
export const MAX_VOCAB = 2 ** 21

export function pairKey(a: number, b: number): number {
  return a * MAX_VOCAB + b
}

export function pairOf(key: number): [number, number] {
  const b = key % MAX_VOCAB
  return [(key - b) / MAX_VOCAB, b]
}

/** Learned merges: rank (priority, lower first) of each pair, and the id each rank produces. */
export interface MergeTable {
  readonly ranks: ReadonlyMap<number, number>
  readonly results: ArrayLike<number>
}

/**
 * Apply BPE merges to one piece's symbols with Hugging Face semantics: repeatedly merge the
 * adjacent pair of lowest rank, the leftmost one on ties. A linked list plus a heap keeps this
 * O(n log n), so a 100 kB run of '=' in a tool output is not quadratic.
 */
export function applyMerges(symbols: ArrayLike<number>, table: MergeTable): number[] {
  const n = symbols.length
  const ids = Array.from(symbols)
  if (n < 2) return ids
  const { ranks, results } = table
  const next = new Int32Array(n)
  const prev = new Int32Array(n)
  for (let i = 0; i < n; i++) {
    prev[i] = i - 1
    next[i] = i + 1 < n ? i + 1 : -1
  }
  const heap = new PairMinHeap()
  for (let i = 0; i + 1 < n; i++) {
    const r = ranks.get(pairKey(ids[i] as number, ids[i + 1] as number))
    if (r !== undefined) heap.push(r, i)
  }
  for (let top = heap.pop(); top !== undefined; top = heap.pop()) {
    const [rank, pos] = top
    const left = ids[pos] as number
    const q = next[pos] as number
    if (left < 0 || q < 0) continue
    // A stale entry: the pair at pos changed since it was pushed (rank identifies the pair).
    if (ranks.get(pairKey(left, ids[q] as number)) !== rank) continue
    ids[pos] = results[rank] as number
    ids[q] = -1
    const after = next[q] as number
    next[pos] = after
    if (after >= 0) prev[after] = pos
    const before = prev[pos] as number
    if (before >= 0) {
      const r = ranks.get(pairKey(ids[before] as number, ids[pos] as number))
      if (r !== undefined) heap.push(r, before)
    }
    if (after >= 0) {
      const r = ranks.get(pairKey(ids[pos] as number, ids[after] as number))
      if (r !== undefined) heap.push(r, pos)
    }
  }
  const out: number[] = []
  for (let i = 0; i >= 0; i = next[i] as number) out.push(ids[i] as number)
  return out
}
