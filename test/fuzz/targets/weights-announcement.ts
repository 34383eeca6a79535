import { createHash } from "node:crypto"
import { create, toBinary } from "@bufbuild/protobuf"
import { Effect, References } from "effect"
import { encodeWeights, TinyMoe } from "../../../model/index.ts"
import { WeightsAnnouncementSchema } from "../../../proto/index.ts"
import { subjectsFor } from "../../../services/bus/index.ts"
import { followWeights } from "../../../services/weights/index.ts"
import { ACCEPTED, type FuzzTarget, REJECTED, type Verdict, verdictOfExit } from "../harness.ts"
import { FuzzBus } from "../memory-bus.ts"
import { mutateProto, toHex } from "../mutate.ts"
import { protoInput } from "../proto-gen.ts"
import type { Random } from "../random.ts"

/**
 * A sampler following a job's weights (followWeights): the announcement it finds under the job's
 * latest key at start-up, pointing at weights in the object store or not. A bad announcement is
 * ignored with a warning; the follower must come up either way.
 */
const fuzzBus = new FuzzBus()
const subjects = subjectsFor("fuzz")
const JOB = "job-w"
const OBJECT = `${JOB}/v1.safetensors`
let weights: Uint8Array = new Uint8Array(0)

const announcement = (rng: Random): Uint8Array => {
  if (rng.bool(0.3)) return protoInput(rng, WeightsAnnouncementSchema, mutateProto)
  const valid = toBinary(
    WeightsAnnouncementSchema,
    create(WeightsAnnouncementSchema, {
      jobId: JOB,
      policyVersion: BigInt(rng.range(0, 3)),
      bucket: subjects.weightsBucket,
      name: OBJECT,
      sha256: createHash("sha256").update(weights).digest("hex"),
      sizeBytes: BigInt(weights.length),
      format: "safetensors",
    }),
  )
  return rng.bool(0.3) ? valid : mutateProto(rng, valid)
}

const follow = async (data: Uint8Array): Promise<Verdict> => {
  const bus = fuzzBus.bus
  const target = {
    version: 0n,
    setWeights: (_m: TinyMoe, v: bigint) => {
      target.version = v
    },
  }
  const exit = await Effect.runPromiseExit(
    Effect.gen(function* () {
      const kv = yield* bus.kv(subjects.weightsBucket)
      yield* kv.put(`${JOB}.latest`, data)
      yield* Effect.scoped(followWeights(bus, subjects, JOB, target))
    }).pipe(Effect.provideService(References.MinimumLogLevel, "None")),
  )
  if (exit._tag === "Failure") return verdictOfExit(exit)
  return target.version > 0n ? ACCEPTED : REJECTED
}

export const weightsAnnouncementTarget: FuzzTarget = {
  name: "weights announcement",
  description:
    "WeightsAnnouncement (latest in KV) → followWeights, fetchWeights, decodeWeights (sampler)",
  setup: async () => {
    await fuzzBus.setup()
    weights = encodeWeights(
      TinyMoe.create({
        config: {
          vocabSize: 8,
          dModel: 8,
          nLayers: 1,
          nHeads: 2,
          nExperts: 4,
          topK: 2,
          dFf: 8,
          maxSeqLen: 16,
        },
        seed: 3,
      }),
    )
    const store = await Effect.runPromise(fuzzBus.bus.objectStore(subjects.weightsBucket))
    await Effect.runPromise(store.put(OBJECT, weights))
  },
  teardown: fuzzBus.teardown,
  make: (rng) => {
    const data = announcement(rng)
    return { input: () => toHex(data), run: () => follow(data) }
  },
}
