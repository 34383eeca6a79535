import { Clock, Effect, Semaphore } from "effect"

export interface TokenBucket {
  /** Waits for a token; callers are served in the order they arrive. */
  readonly take: Effect.Effect<void>
  /** Tokens there are now (fractional while refilling). */
  readonly available: Effect.Effect<number>
}

/**
 * Token bucket: at most `burst` creations at once, refilled at `perSecond`. Docker engines fall
 * over under creation storms long before they run out of memory, so creation is paced. Time is
 * the Clock's, so a test moves it instead of waiting.
 */
export const makeTokenBucket = (perSecond: number, burst: number): Effect.Effect<TokenBucket> =>
  Effect.gen(function* () {
    let tokens = burst
    let last = yield* Clock.currentTimeMillis
    const refill = Effect.map(Clock.currentTimeMillis, (now) => {
      tokens = Math.min(burst, tokens + ((now - last) / 1000) * perSecond)
      last = now
      return tokens
    })
    // One taker at a time, in arrival order: a later caller cannot overtake a waiting one.
    const turn = yield* Semaphore.make(1)
    const take = turn.withPermits(1)(
      Effect.gen(function* () {
        for (;;) {
          if ((yield* refill) >= 1) {
            tokens -= 1
            return
          }
          yield* Effect.sleep(Math.ceil(((1 - tokens) / perSecond) * 1000))
        }
      }),
    )
    return { take, available: refill }
  })
