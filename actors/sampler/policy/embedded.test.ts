import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { TinyMoe } from "../../../model/index.ts"
import type { TurnSampling } from "./backend.ts"
import { embeddedPolicy } from "./embedded.ts"

const config = {
  vocabSize: 40,
  dModel: 16,
  nLayers: 2,
  nHeads: 2,
  nExperts: 4,
  topK: 2,
  dFf: 24,
  maxSeqLen: 256,
}
const sampling: TurnSampling = { temperature: 1, topP: 1, maxTokens: 12, stopTokenIds: [], seed: 1 }

const run = <A, E>(f: Effect.Effect<A, E, import("effect").Scope.Scope>) =>
  Effect.runPromise(Effect.scoped(f))

describe("embedded TinyMoE backend", () => {
  it("serves concurrent sessions in one batch, reports each position's routing once, and switches weights between turns", async () => {
    const model = TinyMoe.create({ config, seed: 1 })
    const next = TinyMoe.create({ config, seed: 2 })
    await run(
      Effect.gen(function* () {
        const policy = yield* embeddedPolicy(model, 1n, { contextLength: 256 })
        const prompt = Uint32Array.from([1, 2, 3, 4, 5])
        const [a, b] = yield* Effect.all(
          [
            policy.generate({ sessionId: "a", ids: prompt, sampling }),
            policy.generate({
              sessionId: "b",
              ids: prompt,
              sampling: { ...sampling, maxTokens: 4 },
            }),
          ],
          { concurrency: "unbounded" },
        )
        expect(a.tokens.length).toBe(12)
        expect(b.tokens.length).toBe(4)
        // Same prompt and seed: the shorter generation is a prefix of the longer one.
        expect([...b.tokens]).toEqual([...a.tokens.subarray(0, 4)])
        expect(a.routing?.start).toBe(0)
        expect(a.routing?.rows.length).toBe((5 + 12 - 1) * 4)
        expect(a.policyVersion).toBe(1n)

        const turn2 = new Uint32Array([...prompt, ...a.tokens, 7, 8])
        const c = yield* policy.generate({ sessionId: "a", ids: turn2, sampling })
        expect(c.routing?.start).toBe(16)
        expect(c.routing?.rows.length).toBe((turn2.length + 12 - 1 - 16) * 4)

        policy.setWeights(next, 2n)
        const turn3 = new Uint32Array([...turn2, ...c.tokens, 9])
        const d = yield* policy.generate({ sessionId: "a", ids: turn3, sampling })
        expect(d.policyVersion).toBe(2n)
        // Positions re-processed under the new weights are not reported again.
        expect(d.routing?.start).toBe(turn2.length + 11)

        const tooLong = yield* Effect.flip(
          policy.generate({ sessionId: "x", ids: new Uint32Array(256), sampling }),
        )
        expect(tooLong.retryable).toBe(false)
        const badId = yield* Effect.flip(
          policy.generate({ sessionId: "y", ids: Uint32Array.from([99]), sampling }),
        )
        expect(badId.message).toMatch(/outside the vocabulary/)
      }),
    )
  })
})
