/** Whether two id sequences are the same, id for id. */
export const sameIds = (a: ArrayLike<number>, b: ArrayLike<number>): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/** Id sequences joined into one new array. */
export const concatIds = (parts: ReadonlyArray<ArrayLike<number>>): Uint32Array => {
  const out = new Uint32Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}
