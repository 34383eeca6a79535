import { Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import { describe, expect, it } from "vitest"
import { Bus, MemoryBusLive } from "../../services/bus/index.ts"
import { tryAcquireLease } from "./lease.ts"

const TTL_MS = 15_000

describe("job lease", () => {
  it("is held until its TTL runs out without a heartbeat, then another coordinator takes it (TestClock)", () =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const kv = yield* (yield* Bus).kv("lease-test")
          const a = Option.getOrThrow(yield* tryAcquireLease(kv, "job-1", "a", TTL_MS))
          expect(Option.isNone(yield* tryAcquireLease(kv, "job-1", "b", TTL_MS))).toBe(true)
          // A heartbeat just before expiry keeps it a whole TTL longer.
          yield* TestClock.adjust(TTL_MS - 1)
          yield* a.heartbeat
          yield* TestClock.adjust(TTL_MS - 1)
          expect(Option.isNone(yield* tryAcquireLease(kv, "job-1", "b", TTL_MS))).toBe(true)
          // No heartbeat: lapsed, b takes it, and a's next write is refused.
          yield* TestClock.adjust(TTL_MS + 1)
          const b = yield* tryAcquireLease(kv, "job-1", "b", TTL_MS)
          expect(Option.isSome(b)).toBe(true)
          const lost = yield* Effect.flip(a.heartbeat)
          expect(lost._tag).toBe("LeaseLost")
        }),
      ).pipe(Effect.provide(MemoryBusLive()), Effect.provide(TestClock.layer())),
    ))
})
