import type { Floats } from "../kernels/kernels.ts"
import type { KvCache } from "./cache.ts"
import type { Row } from "./forward.ts"
import type { TinyMoe } from "./model.ts"
import { allocRouting, type Routing } from "./routing.ts"

/**
 * One conversation held by the sampler: the tokens so far, the KV cache of the positions already
 * pushed through the model, and the expert choices recorded for each of those positions.
 * Tokens are appended first and processed lazily, so the last sampled token of a turn is
 * processed together with the observation that follows it (one prefill instead of two).
 */
export class Sequence {
  readonly tokens: number[] = []
  /** Routing rows [processed positions, layers, top_k], in position order; grows by doubling. */
  private routingRows: Routing
  private routingLength = 0
  /** Logits after the last processed position; undefined until something was processed. */
  lastLogits: Floats | undefined

  constructor(
    readonly model: TinyMoe,
    readonly cache: KvCache = model.newCache(),
  ) {
    const c = model.config
    this.routingRows = allocRouting(64, c.nLayers, c.topK, c.nExperts)
  }

  /**
   * A copy that continues independently: the tokens, the processed positions' keys and values
   * (copied into a cache of `capacity`), their routing and the last logits. Forking a processed
   * prompt and appending to the copy is exactly what processing prompt + continuation would
   * have given (a row's numbers depend only on its token, position and cache).
   */
  fork(capacity: number = this.cache.capacity): Sequence {
    if (this.tokens.length > capacity)
      throw new RangeError(`cannot fork ${this.tokens.length} tokens into a context of ${capacity}`)
    const copy = new Sequence(this.model, this.cache.fork(this.cache.length, capacity))
    copy.tokens.push(...this.tokens)
    copy.record(this.routing())
    copy.lastLogits = this.lastLogits?.slice()
    return copy
  }

  /** Positions already pushed through the model. */
  get processed(): number {
    return this.cache.length
  }

  append(tokens: ArrayLike<number>): void {
    if (this.tokens.length + tokens.length > this.cache.capacity) {
      throw new RangeError(
        `sequence of ${this.tokens.length + tokens.length} tokens exceeds the context of ${this.cache.capacity}`,
      )
    }
    for (let i = 0; i < tokens.length; i++) this.tokens.push(tokens[i] as number)
  }

  /** Rows not yet processed. */
  pendingRows(): Row[] {
    const rows: Row[] = []
    for (let i = this.cache.length; i < this.tokens.length; i++)
      rows.push({ cache: this.cache, token: this.tokens[i] as number })
    return rows
  }

  /** Routing recorded for positions [from, to). */
  routing(from = 0, to = this.cache.length): Routing {
    const c = this.model.config
    const width = c.nLayers * c.topK
    return this.routingRows.slice(from * width, to * width)
  }

  /** Prefill: processes every pending token, keeping the last position's logits. */
  flush(): void {
    const rows = this.pendingRows()
    if (rows.length === 0) return
    const result = this.model.forward(rows, { logits: "last" })
    this.record(result.routing)
    this.lastLogits = result.logits
  }

  /** Stores routing rows of newly processed positions (called by batched decode as well). */
  record(rows: Routing): void {
    const needed = this.routingLength + rows.length
    if (needed > this.routingRows.length) {
      const c = this.model.config
      const width = c.nLayers * c.topK
      const grown = allocRouting(
        Math.max(needed, this.routingRows.length * 2) / width,
        c.nLayers,
        c.topK,
        c.nExperts,
      )
      grown.set(this.routingRows.subarray(0, this.routingLength))
      this.routingRows = grown
    }
    this.routingRows.set(rows, this.routingLength)
    this.routingLength = needed
  }
}
