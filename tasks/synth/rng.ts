/**
 * A small seeded PRNG (sfc32, seeded from a cyrb128 hash of a string key), so that a task is a
 * pure function of (family, seed, index, difficulty): same key, byte-identical task.
 */
export interface Rng {
  /** Uniform in [0, 1). */
  readonly float: () => number
  /** Uniform integer in [min, max], both inclusive. */
  readonly int: (min: number, max: number) => number
  readonly chance: (p: number) => boolean
  readonly pick: <T>(items: ReadonlyArray<T>) => T
  /** A new array, Fisher–Yates shuffled. */
  readonly shuffle: <T>(items: ReadonlyArray<T>) => Array<T>
  /** k distinct elements, in random order. */
  readonly sample: <T>(items: ReadonlyArray<T>, k: number) => Array<T>
}

/** cyrb128: four 32-bit words from a string, the usual seed for sfc32. */
const cyrb128 = (key: string): [number, number, number, number] => {
  let h1 = 1779033703
  let h2 = 3144134277
  let h3 = 1013904242
  let h4 = 2773480762
  for (let i = 0; i < key.length; i++) {
    const k = key.charCodeAt(i)
    h1 = h2 ^ Math.imul(h1 ^ k, 597399067)
    h2 = h3 ^ Math.imul(h2 ^ k, 2869860233)
    h3 = h4 ^ Math.imul(h3 ^ k, 951274213)
    h4 = h1 ^ Math.imul(h4 ^ k, 2716044179)
  }
  h1 = Math.imul(h3 ^ (h1 >>> 18), 597399067)
  h2 = Math.imul(h4 ^ (h2 >>> 22), 2869860233)
  h3 = Math.imul(h1 ^ (h3 >>> 17), 951274213)
  h4 = Math.imul(h2 ^ (h4 >>> 19), 2716044179)
  h1 ^= h2 ^ h3 ^ h4
  h2 ^= h1
  h3 ^= h1
  h4 ^= h1
  return [h1 >>> 0, h2 >>> 0, h3 >>> 0, h4 >>> 0]
}

export const makeRng = (key: string): Rng => {
  let [a, b, c, d] = cyrb128(key)
  const next = (): number => {
    a |= 0
    b |= 0
    c |= 0
    d |= 0
    const t = (((a + b) | 0) + d) | 0
    d = (d + 1) | 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) | 0
    c = (c << 21) | (c >>> 11)
    c = (c + t) | 0
    return (t >>> 0) / 4294967296
  }
  // sfc32 wants a few rounds before its output is well mixed.
  for (let i = 0; i < 12; i++) next()
  const int = (min: number, max: number): number => {
    if (!Number.isInteger(min) || !Number.isInteger(max) || max < min)
      throw new RangeError(`rng.int(${min}, ${max}): want integers with min <= max`)
    return min + Math.floor(next() * (max - min + 1))
  }
  const pick = <T>(items: ReadonlyArray<T>): T => {
    if (items.length === 0) throw new RangeError("rng.pick: no items")
    return items[int(0, items.length - 1)] as T
  }
  const shuffle = <T>(items: ReadonlyArray<T>): Array<T> => {
    const out = [...items]
    for (let i = out.length - 1; i > 0; i--) {
      const j = int(0, i)
      const tmp = out[i] as T
      out[i] = out[j] as T
      out[j] = tmp
    }
    return out
  }
  const sample = <T>(items: ReadonlyArray<T>, k: number): Array<T> => {
    if (k > items.length) throw new RangeError(`rng.sample: ${k} of ${items.length} items`)
    return shuffle(items).slice(0, k)
  }
  return { float: next, int, chance: (p) => next() < p, pick, shuffle, sample }
}
