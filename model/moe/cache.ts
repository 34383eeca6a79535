import type { Floats } from "../kernels/kernels.ts"
import { kvWidth, type TinyMoeConfig } from "./config.ts"
import { allocFloats, type Precision } from "./params.ts"

/** Positions a cache holds at first; it grows (doubling, up to its capacity) as they fill. */
const INITIAL_POSITIONS = 256

/**
 * Keys (after RoPE) and values of every processed position, per layer, for one sequence. Its
 * length is the number of positions already pushed through the model. Storage grows on demand
 * (`reserve`) up to `capacity`: most sequences (an episode's turns) use a small part of the
 * context, and allocating and faulting in the whole of it per sequence cost a sampler ~30 ms.
 */
export class KvCache {
  readonly keys: Floats[]
  readonly values: Floats[]
  length = 0
  /** Positions the arrays hold now (≤ capacity). */
  private allocated: number

  constructor(
    readonly config: TinyMoeConfig,
    readonly precision: Precision,
    readonly capacity: number = config.maxSeqLen,
  ) {
    this.keys = []
    this.values = []
    this.allocated = Math.min(capacity, INITIAL_POSITIONS)
    for (let l = 0; l < config.nLayers; l++) {
      this.keys.push(allocFloats(precision, this.allocated * kvWidth(config)))
      this.values.push(allocFloats(precision, this.allocated * kvWidth(config)))
    }
  }

  /** Makes room for `positions` positions (at most capacity); earlier contents are kept. */
  reserve(positions: number): void {
    if (positions <= this.allocated) return
    if (positions > this.capacity)
      throw new RangeError(`sequence exceeds the cache capacity of ${this.capacity} positions`)
    const next = Math.min(this.capacity, Math.max(positions, this.allocated * 2))
    const d = kvWidth(this.config)
    const used = this.length * d
    for (let l = 0; l < this.keys.length; l++) {
      const keys = allocFloats(this.precision, next * d)
      const values = allocFloats(this.precision, next * d)
      keys.set((this.keys[l] as Floats).subarray(0, used))
      values.set((this.values[l] as Floats).subarray(0, used))
      this.keys[l] = keys
      this.values[l] = values
    }
    this.allocated = next
  }

  /** Forgets positions from `length` on (e.g. to re-sample from a shared prompt). */
  truncate(length: number): void {
    if (length < 0 || length > this.length)
      throw new RangeError(`cannot truncate a cache of ${this.length} to ${length}`)
    this.length = length
  }

  /** A new cache (of `capacity` positions) holding a copy of this one's first `length` positions. */
  fork(length: number = this.length, capacity: number = this.capacity): KvCache {
    if (length < 0 || length > this.length || length > capacity)
      throw new RangeError(
        `cannot fork ${length} of ${this.length} positions into a cache of ${capacity}`,
      )
    const copy = new KvCache(this.config, this.precision, capacity)
    copy.reserve(length)
    const n = length * kvWidth(this.config)
    for (let l = 0; l < this.keys.length; l++) {
      ;(copy.keys[l] as Floats).set((this.keys[l] as Floats).subarray(0, n))
      ;(copy.values[l] as Floats).set((this.values[l] as Floats).subarray(0, n))
    }
    copy.length = length
    return copy
  }

  /** Bytes held, for memory accounting. */
  get bytes(): number {
    return this.keys.reduce((n, k) => n + k.byteLength, 0) * 2
  }
}
