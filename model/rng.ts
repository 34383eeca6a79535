/**
 * A small seeded generator (SplitMix32 state, Mulberry32 output) so that initialisation and
 * sampling are reproducible from a seed on every platform; Math.random cannot be seeded.
 */
export class Rng {
  private state: number

  constructor(seed: number) {
    this.state = seed >>> 0
  }

  /** Uniform in [0, 1), 32 bits of entropy. */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0
    let t = this.state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }

  /** Standard normal (Box–Muller). */
  normal(): number {
    let u = this.next()
    while (u === 0) u = this.next()
    const v = this.next()
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v)
  }

  /** An independent generator derived from this one (for per-episode streams). */
  fork(): Rng {
    return new Rng(Math.floor(this.next() * 4294967296))
  }

  /** The state, to checkpoint and resume a stream exactly. */
  get seedState(): number {
    return this.state
  }
}
