import { Rng } from "../../model/rng.ts"

/**
 * The fuzzer's randomness: the model's seeded generator (Mulberry32) per case, derived from the
 * run's seed, the target's name and the case's index, so any case can be replayed on its own.
 */
export class Random extends Rng {
  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n)
  }

  /** An integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1)
  }

  bool(p = 0.5): boolean {
    return this.next() < p
  }

  pick<T>(items: ReadonlyArray<T>): T {
    const item = items[this.int(items.length)]
    if (item === undefined) throw new Error("pick from an empty list")
    return item
  }

  /** Mostly small sizes, sometimes up to `max`: small inputs find most bugs, large ones the rest. */
  size(max: number): number {
    return this.bool(0.8) ? this.int(Math.min(max, 16) + 1) : this.int(max + 1)
  }

  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n)
    for (let i = 0; i < n; i++) out[i] = this.int(256)
    return out
  }

  /** A uint32 as a bigint-free number. */
  u32(): number {
    return this.int(0x1_0000_0000)
  }

  /**
   * Text from a mix of ASCII, punctuation, controls and multi-byte characters; lone surrogates
   * too unless `wellFormed` (protobuf strings off the wire are always well-formed UTF-16).
   */
  text(maxLength: number, wellFormed = false): string {
    const n = this.size(maxLength)
    let s = ""
    for (let i = 0; i < n; i++) s += this.char(wellFormed)
    return s
  }

  char(wellFormed = false): string {
    const kind = this.int(8)
    switch (wellFormed && kind === 4 ? 2 : kind) {
      case 0:
        return String.fromCharCode(this.int(32))
      case 1:
        return this.pick(["{", "}", "[", "]", '"', "'", "\\", ":", ",", "=", "#", "`", "\n", "$"])
      case 2:
        return String.fromCodePoint(this.range(0x80, 0x7ff))
      case 3:
        return String.fromCodePoint(this.pick([0x1f600, 0x10ffff, 0xfeff, 0x2028, 0x200b]))
      case 4:
        return String.fromCharCode(this.range(0xd800, 0xdfff))
      default:
        return String.fromCharCode(this.range(0x20, 0x7e))
    }
  }
}

/** FNV-1a over the text: the case seed of `${seed}:${target}:${index}`. */
export const caseSeed = (seed: number, target: string, index: number): number => {
  let h = 0x811c9dc5
  const text = `${seed}:${target}:${index}`
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}
