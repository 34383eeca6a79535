import type { TinyMoe } from "./model.ts"
import { Sequence } from "./sequence.ts"

/**
 * Processed prompt prefixes kept for reuse, so that a system prompt shared by every episode is
 * pushed through the model once rather than once per sequence. `start(tokens)` returns a new
 * sequence holding `tokens`, whose longest remembered prefix is already processed (its keys,
 * values, routing and logits copied); the rest is pending as usual. Copies are exact: a row's
 * numbers depend only on its token, position and cache, so the routing recorded for R3 and the
 * log-probs are what processing the whole prompt would have given.
 *
 * Entries are whole processed sequences (their KV cache is the memory held), least recently used
 * first out past `maxEntries`. The model's weights must not change under a cache: make a new one
 * per policy version.
 */
export class PrefixCache {
  private readonly entries: Sequence[] = []
  readonly stats = { hits: 0, misses: 0, reusedTokens: 0 }

  constructor(
    readonly model: TinyMoe,
    readonly maxEntries = 8,
  ) {}

  /** Processes `tokens` (if not already held) and keeps them as a reusable prefix. */
  remember(tokens: ArrayLike<number>): void {
    if (tokens.length === 0) return
    const held = this.longest(tokens)
    if (held !== undefined && held.tokens.length === tokens.length) return
    const sequence = this.start(tokens, tokens.length)
    sequence.flush()
    this.entries.unshift(sequence)
    if (this.entries.length > this.maxEntries) this.entries.length = this.maxEntries
  }

  /** A new sequence of `capacity` positions holding `tokens`, reusing the longest held prefix. */
  start(tokens: ArrayLike<number>, capacity: number = this.model.config.maxSeqLen): Sequence {
    const held = this.longest(tokens)
    let sequence: Sequence
    if (held === undefined) {
      this.stats.misses++
      sequence = new Sequence(this.model, this.model.newCache(capacity))
      sequence.append(tokens)
      return sequence
    }
    this.stats.hits++
    this.stats.reusedTokens += held.tokens.length
    this.entries.splice(this.entries.indexOf(held), 1)
    this.entries.unshift(held)
    sequence = held.fork(Math.min(capacity, this.model.config.maxSeqLen))
    const rest: number[] = []
    for (let i = held.tokens.length; i < tokens.length; i++) rest.push(tokens[i] as number)
    sequence.append(rest)
    return sequence
  }

  /** Held prefixes, most recently used first. */
  get size(): number {
    return this.entries.length
  }

  private longest(tokens: ArrayLike<number>): Sequence | undefined {
    let best: Sequence | undefined
    for (const entry of this.entries) {
      const t = entry.tokens
      if (t.length > tokens.length || (best !== undefined && t.length <= best.tokens.length))
        continue
      let i = 0
      while (i < t.length && t[i] === tokens[i]) i++
      if (i === t.length) best = entry
    }
    return best
  }
}
