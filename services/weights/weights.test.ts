import { Deferred, Effect, References } from "effect"
import { describe, expect, it } from "vitest"
import { TinyMoe } from "../../model/index.ts"
import { makeMemoryBus, subjectsFor } from "../bus/index.ts"
import { followWeights, latestKey, publishWeights } from "./weights.ts"

const config = {
  vocabSize: 8,
  dModel: 8,
  nLayers: 1,
  nHeads: 2,
  nExperts: 4,
  topK: 2,
  dFf: 8,
  maxSeqLen: 16,
}

describe("followWeights", () => {
  it("ignores undecodable announcements, at start-up and later, and follows the next good one (found by npm run test:fuzz)", async () => {
    const subjects = subjectsFor("wtest")
    const job = "job-w"
    const version = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* makeMemoryBus()
          const kv = yield* bus.kv(subjects.weightsBucket)
          // A truncated message: fromBinary throws RangeError("premature EOF") on it.
          yield* kv.put(latestKey(job), Uint8Array.of(0x0a, 0x05))
          const applied = yield* Deferred.make<bigint>()
          const follower = {
            version: 0n,
            setWeights: (_m: TinyMoe, v: bigint) => {
              follower.version = v
              Effect.runSync(Deferred.succeed(applied, v))
            },
          }
          yield* followWeights(bus, subjects, job, follower)
          yield* bus.publish(subjects.weights(job), Uint8Array.of(0xff, 0xff))
          yield* publishWeights(bus, subjects, job, TinyMoe.create({ config, seed: 1 }), 2n, 1n)
          return yield* Deferred.await(applied).pipe(Effect.timeout("10 seconds"))
        }),
      ).pipe(Effect.provideService(References.MinimumLogLevel, "None")),
    )
    expect(version).toBe(2n)
  })
})
