import type { Floats } from "../kernels/kernels.ts"
import type { TinyMoeConfig } from "./config.ts"
import { allocFloats, type Precision } from "./params.ts"

/**
 * Keys (after RoPE) and values of every processed position, per layer, for one sequence. Its
 * length is the number of positions already pushed through the model.
 */
export class KvCache {
  readonly keys: Floats[]
  readonly values: Floats[]
  length = 0

  constructor(
    readonly config: TinyMoeConfig,
    readonly precision: Precision,
    readonly capacity: number = config.maxSeqLen,
  ) {
    this.keys = []
    this.values = []
    for (let l = 0; l < config.nLayers; l++) {
      this.keys.push(allocFloats(precision, capacity * config.dModel))
      this.values.push(allocFloats(precision, capacity * config.dModel))
    }
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
    const n = length * this.config.dModel
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
