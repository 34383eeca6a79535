import type { RoutingRows } from "./policy/backend.ts"

/** One contiguous span ready to publish as a TrajectoryChunk. */
export interface ChunkSpan {
  readonly start: number
  readonly end: number
  readonly ids: Uint32Array
  readonly logprobs: Float32Array
  readonly lossMask: Uint8Array
  /** Routing rows for positions [start, start + routingRows), or undefined when never recorded. */
  readonly routing: RoutingRows | undefined
  readonly turnStarts: ReadonlyArray<number>
  readonly versionStart: bigint
  readonly versionEnd: bigint
}

class Growable<T extends Uint32Array | Float32Array | Uint8Array> {
  private data: T
  length = 0
  constructor(private readonly make: (n: number) => T) {
    this.data = make(256)
  }
  push(values: ArrayLike<number>): void {
    if (this.length + values.length > this.data.length) {
      const grown = this.make(Math.max(this.length + values.length, this.data.length * 2))
      grown.set(this.data.subarray(0, this.length))
      this.data = grown
    }
    this.data.set(values, this.length)
    this.length += values.length
  }
  view(from: number, to: number): T {
    return this.data.subarray(from, to) as T
  }
  /** Drops [0, from) (already published), keeping indices relative to `offset`. */
  dropBefore(count: number): void {
    this.data.copyWithin(0, count, this.length)
    this.length -= count
  }
}

/**
 * Builds an episode's trajectory token by token in the TITO discipline: the ids the policy
 * produced are stored verbatim with loss mask 1 and their behaviour log-probs; template glue and
 * observations are appended as ids with loss mask 0. Nothing is ever re-tokenised, so the
 * learner trains on exactly the sampled ids. Published spans are dropped from the per-token
 * arrays; only the ids (the policy's context) are kept, so memory is bounded by the context
 * budget.
 */
export class TrajectoryBuilder {
  private readonly ids = new Growable((n) => new Uint32Array(n))
  /** Per-token arrays of the unpublished tail, starting at position `published`. */
  private readonly logprobs = new Growable((n) => new Float32Array(n))
  private readonly mask = new Growable((n) => new Uint8Array(n))
  private versions: bigint[] = []
  private generatedVersions: Array<bigint | undefined> = []
  private routingParts: RoutingRows[] = []
  private turnStarts: number[] = []
  /** Positions < routed have routing rows (first report wins). */
  private routed = 0
  private routingLayout: { layers: number; topK: number; numExperts: number } | undefined
  private published = 0
  private version: bigint
  generatedTokens = 0
  private minVersion: bigint | undefined
  private maxVersion: bigint | undefined

  constructor(initialVersion: bigint) {
    this.version = initialVersion
  }

  get length(): number {
    return this.ids.length
  }

  /** The whole sequence so far: the policy's context. */
  context(): Uint32Array {
    return this.ids.view(0, this.ids.length)
  }

  get routedPositions(): number {
    return this.routed
  }

  get publishedPositions(): number {
    return this.published
  }

  /** Marks the next appended position as the start of a turn. */
  startTurn(): void {
    if (this.turnStarts.at(-1) !== this.length) this.turnStarts.push(this.length)
  }

  /** Prompt, template glue, observations: loss mask 0, log-prob 0. */
  appendContext(ids: ArrayLike<number>): void {
    this.ids.push(ids)
    this.logprobs.push(new Float32Array(ids.length))
    this.mask.push(new Uint8Array(ids.length))
    for (let i = 0; i < ids.length; i++) {
      this.versions.push(this.version)
      this.generatedVersions.push(undefined)
    }
  }

  /** Tokens the policy sampled (loss mask 1), with their behaviour log-probs and weights version. */
  appendGenerated(ids: ArrayLike<number>, logprobs: ArrayLike<number>, version: bigint): void {
    if (logprobs.length !== ids.length)
      throw new RangeError(`${ids.length} ids but ${logprobs.length} logprobs`)
    this.version = version
    this.ids.push(ids)
    this.logprobs.push(logprobs)
    this.mask.push(new Uint8Array(ids.length).fill(1))
    for (let i = 0; i < ids.length; i++) {
      this.versions.push(version)
      this.generatedVersions.push(version)
    }
    this.generatedTokens += ids.length
    if (ids.length > 0) {
      if (this.minVersion === undefined || version < this.minVersion) this.minVersion = version
      if (this.maxVersion === undefined || version > this.maxVersion) this.maxVersion = version
    }
  }

  /** Lowest and highest weights version that generated any token (the initial one if none did). */
  get versionRange(): { start: bigint; end: bigint } {
    return { start: this.minVersion ?? this.version, end: this.maxVersion ?? this.version }
  }

  /**
   * Routing reported by the backend. Positions already routed keep their first rows (those that
   * produced the behaviour log-probs); rows must continue without a gap.
   */
  addRouting(rows: RoutingRows | undefined): void {
    if (!rows || rows.rows.length === 0) return
    const width = rows.layers * rows.topK
    if (
      this.routingLayout &&
      (this.routingLayout.layers !== rows.layers || this.routingLayout.topK !== rows.topK)
    ) {
      throw new RangeError("routing layout changed within an episode")
    }
    this.routingLayout = { layers: rows.layers, topK: rows.topK, numExperts: rows.numExperts }
    const count = rows.rows.length / width
    const end = rows.start + count
    if (rows.start > this.routed)
      throw new RangeError(
        `routing rows start at ${rows.start}, but only ${this.routed} positions are routed`,
      )
    if (end > this.length)
      throw new RangeError(
        `routing rows reach position ${end} beyond the sequence (${this.length})`,
      )
    if (end <= this.routed) return
    const skip = this.routed - rows.start
    this.routingParts.push({ ...rows, start: this.routed, rows: rows.rows.subarray(skip * width) })
    this.routed = end
  }

  /**
   * The next span to publish: up to the routed frontier while the episode runs (a chunk's
   * routing must cover all its positions), everything at the end (`final`).
   */
  takeSpan(final: boolean): ChunkSpan | undefined {
    const end = final || !this.routingLayout ? this.length : Math.min(this.routed, this.length)
    if (end <= this.published && !(final && this.published === 0 && end === 0)) return undefined
    const start = this.published
    const n = end - start
    const routingEnd = Math.min(this.routed, end)
    let routing: RoutingRows | undefined
    if (this.routingLayout && routingEnd > start) {
      const width = this.routingLayout.layers * this.routingLayout.topK
      const first = this.routingParts[0]
      const rows =
        first && first.rows instanceof Uint16Array
          ? new Uint16Array((routingEnd - start) * width)
          : new Uint8Array((routingEnd - start) * width)
      let filled = 0
      const keep: RoutingRows[] = []
      for (const part of this.routingParts) {
        const partEnd = part.start + part.rows.length / width
        const from = Math.max(part.start, start)
        const to = Math.min(partEnd, routingEnd)
        if (to > from) {
          rows.set(
            part.rows.subarray((from - part.start) * width, (to - part.start) * width),
            filled,
          )
          filled += (to - from) * width
        }
        if (partEnd > routingEnd)
          keep.push({
            ...part,
            start: Math.max(part.start, routingEnd),
            rows: part.rows.subarray(Math.max(0, routingEnd - part.start) * width),
          })
      }
      this.routingParts = keep
      routing = { start, rows, ...this.routingLayout }
    }
    const generated = this.generatedVersions.slice(0, n).filter((v): v is bigint => v !== undefined)
    const spanVersions = generated.length > 0 ? generated : this.versions.slice(0, Math.max(1, n))
    let versionStart = spanVersions[0] ?? this.version
    let versionEnd = versionStart
    for (const v of spanVersions) {
      if (v < versionStart) versionStart = v
      if (v > versionEnd) versionEnd = v
    }
    const span: ChunkSpan = {
      start,
      end,
      ids: this.ids.view(start, end).slice(),
      logprobs: this.logprobs.view(0, n).slice(),
      lossMask: this.mask.view(0, n).slice(),
      routing,
      turnStarts: this.turnStarts.filter((t) => t >= start && t < end),
      versionStart,
      versionEnd,
    }
    this.logprobs.dropBefore(n)
    this.mask.dropBefore(n)
    this.versions = this.versions.slice(n)
    this.generatedVersions = this.generatedVersions.slice(n)
    this.turnStarts = this.turnStarts.filter((t) => t >= end)
    this.published = end
    return span
  }
}
