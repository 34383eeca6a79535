import { randomBytes } from "node:crypto"
import { create } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { TinyMoe } from "../../../model/index.ts"
import { EpisodeWorkItemSchema } from "../../../proto/index.ts"
import { Bus, MemoryBusLive, subjectsFor } from "../../../services/bus/index.ts"
import { publishWeights } from "../../../services/weights/index.ts"
import { jobPolicies, policyKey } from "./job-policies.ts"

const VOCAB = 64
const item = (jobId: string, policyRef = "") =>
  create(EpisodeWorkItemSchema, { jobId, episodeId: `${jobId}-e0`, policyRef })

/** One greedy token after a fixed prompt. */
const request = (sessionId: string) => ({
  sessionId,
  ids: new Uint32Array([1, 2, 3]),
  sampling: { temperature: 0, topP: 1, maxTokens: 1, stopTokenIds: [] },
})

describe("per-job policies", () => {
  it("gives each job its own weights: a train job's published version, an eval job's policy_ref", () =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          const subjects = subjectsFor(`s${randomBytes(3).toString("hex")}`)
          const trained = TinyMoe.create({ config: { vocabSize: VOCAB }, seed: 9 })
          yield* publishWeights(bus, subjects, "job-a", trained, 3n, 3n)
          const policies = yield* jobPolicies({
            bus,
            subjects,
            vocabSize: VOCAB,
            contextLength: 64,
          })
          const a = yield* policies.forItem(item("job-a"))
          const b = yield* policies.forItem(item("job-b"))
          const seeded = yield* policies.forItem(item("job-c", "tinymoe:seed:9"))
          const ra = yield* a.generate(request("job-a:e0:0"))
          const rb = yield* b.generate(request("job-b:e0:0"))
          const rs = yield* seeded.generate(request("job-c:e0:0"))
          expect(ra.policyVersion).toBe(3n)
          expect(rb.policyVersion).toBe(0n)
          // The published weights are seed 9's: the same greedy token and log-prob.
          expect([...ra.tokens]).toEqual([...rs.tokens])
          expect(ra.logprobs[0]).toBeCloseTo(rs.logprobs[0] ?? Number.NaN, 5)
          expect(policies.size()).toBe(3)
          // The same job shares one policy.
          yield* policies.forItem(item("job-a"))
          expect(policies.size()).toBe(3)

          const bad = yield* Effect.flip(policies.forItem(item("job-d", "no-such-object")))
          expect(bad._tag).toBe("PolicyError")
          expect(bad.message).toContain("no-such-object")
          expect(policies.size()).toBe(3)
          expect(policyKey(item("j"))).toBe("job:j")
        }),
      ).pipe(Effect.provide(MemoryBusLive())),
    ))

  it("samples a train job's v0 when its learner started from other weights (policy_ref)", () =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          const subjects = subjectsFor(`s${randomBytes(3).toString("hex")}`)
          // The learner's starting point is version 0 too, but not tinymoe:init's weights.
          const warm = TinyMoe.create({ config: { vocabSize: VOCAB, dModel: 32 }, seed: 4 })
          yield* publishWeights(bus, subjects, "job-t", warm, 0n, 0n)
          const policies = yield* jobPolicies({
            bus,
            subjects,
            vocabSize: VOCAB,
            contextLength: 64,
          })
          const r = yield* (yield* policies.forItem(item("job-t"))).generate(request("job-t:e0:0"))
          const own = yield* (yield* jobPolicies({
            bus,
            subjects,
            vocabSize: VOCAB,
            contextLength: 64,
          })).forItem(item("job-x", "job:job-t"))
          const expected = yield* own.generate(request("job-x:e0:0"))
          const init = yield* (yield* policies.forItem(item("job-i", "tinymoe:init"))).generate(
            request("job-i:e0:0"),
          )
          expect(r.policyVersion).toBe(0n)
          expect(r.logprobs[0]).toBe(expected.logprobs[0])
          expect(r.logprobs[0]).not.toBe(init.logprobs[0])
        }),
      ).pipe(Effect.provide(MemoryBusLive())),
    ))
})
