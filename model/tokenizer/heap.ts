/** Binary min-heap of (primary, secondary) number pairs, ordered by primary then secondary. */
export class PairMinHeap {
  private primary: number[] = []
  private secondary: number[] = []

  get size(): number {
    return this.primary.length
  }

  push(p: number, s: number): void {
    const a = this.primary
    const b = this.secondary
    let i = a.length
    a.push(p)
    b.push(s)
    while (i > 0) {
      const parent = (i - 1) >> 1
      const pp = a[parent] as number
      const ps = b[parent] as number
      if (pp < p || (pp === p && ps <= s)) break
      a[i] = pp
      b[i] = ps
      i = parent
    }
    a[i] = p
    b[i] = s
  }

  /** Removes the least pair and returns it; undefined when empty. */
  pop(): [number, number] | undefined {
    const a = this.primary
    const b = this.secondary
    if (a.length === 0) return undefined
    const top: [number, number] = [a[0] as number, b[0] as number]
    const lastP = a.pop() as number
    const lastS = b.pop() as number
    const n = a.length
    if (n > 0) {
      let i = 0
      for (;;) {
        const l = 2 * i + 1
        if (l >= n) break
        const r = l + 1
        let c = l
        if (r < n) {
          const lp = a[l] as number
          const rp = a[r] as number
          if (rp < lp || (rp === lp && (b[r] as number) < (b[l] as number))) c = r
        }
        const cp = a[c] as number
        const cs = b[c] as number
        if (lastP < cp || (lastP === cp && lastS <= cs)) break
        a[i] = cp
        b[i] = cs
        i = c
      }
      a[i] = lastP
      b[i] = lastS
    }
    return top
  }
}
