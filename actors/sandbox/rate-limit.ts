import { Effect } from "effect"

/**
 * Token bucket: at most `burst` creations at once, refilled at `perSecond`. Docker engines fall
 * over under creation storms long before they run out of memory, so creation is paced.
 */
export const makeTokenBucket = (perSecond: number, burst: number) => {
  let tokens = burst
  let last = Date.now()
  const refill = () => {
    const now = Date.now()
    tokens = Math.min(burst, tokens + ((now - last) / 1000) * perSecond)
    last = now
  }
  /** Waits for a token; callers queue in the order they arrive. */
  let tail: Promise<void> = Promise.resolve()
  const take: Effect.Effect<void> = Effect.promise(() => {
    const turn = tail.then(async () => {
      for (;;) {
        refill()
        if (tokens >= 1) {
          tokens -= 1
          return
        }
        await new Promise((r) => setTimeout(r, Math.ceil(((1 - tokens) / perSecond) * 1000)))
      }
    })
    tail = turn
    return turn
  })
  const available = () => {
    refill()
    return tokens
  }
  return { take, available }
}

export type TokenBucket = ReturnType<typeof makeTokenBucket>
