import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { describe, expect, it } from "vitest"
import { makeTokenBucket } from "./rate-limit.ts"

describe("token bucket", () => {
  it("lets a burst through at once, then paces takers at the rate, in arrival order (TestClock)", () =>
    Effect.runPromise(
      Effect.gen(function* () {
        const bucket = yield* makeTokenBucket(2, 3)
        const order: number[] = []
        const takers = yield* Effect.forEach([0, 1, 2, 3, 4], (i) =>
          Effect.forkChild(
            Effect.andThen(
              bucket.take,
              Effect.sync(() => order.push(i)),
            ),
          ),
        )
        yield* Effect.yieldNow
        expect(order).toEqual([0, 1, 2])
        // 2 per second: one more every 500 ms.
        yield* TestClock.adjust("499 millis")
        expect(order).toEqual([0, 1, 2])
        yield* TestClock.adjust("1 millis")
        expect(order).toEqual([0, 1, 2, 3])
        yield* TestClock.adjust("500 millis")
        expect(order).toEqual([0, 1, 2, 3, 4])
        yield* Fiber.joinAll(takers)
        expect(yield* bucket.available).toBe(0)
        // Idle time refills up to the burst, never beyond.
        yield* TestClock.adjust("1 hour")
        expect(yield* bucket.available).toBe(3)
      }).pipe(Effect.provide(TestClock.layer())),
    ))
})
