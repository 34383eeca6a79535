/**
 * A job's `policy_ref`, resolved to weights the same way by the learner (its starting point)
 * and the samplers (an eval job's policy): `tinymoe:init` (or empty) is the TinyMoE initialised
 * from seed 0 — what `t1 actor sampler` and the learner build with no flags —,
 * `tinymoe:seed:N` another seed, `job:<id>` another job's latest published weights, and any
 * other name an object in the weights bucket (`<prefix>-weights`).
 */
import { fromBinary } from "@bufbuild/protobuf"
import { Effect, Option } from "effect"
import { decodeWeights, type Kernels, TinyMoe } from "../../model/index.ts"
import { WeightsAnnouncementSchema } from "../../proto/index.ts"
import type { BusError, BusShape, Subjects } from "../bus/index.ts"
import { fetchWeights, latestKey, WeightsUnavailable } from "./weights.ts"

export interface ResolvedPolicy {
  readonly model: TinyMoe
  readonly version: bigint
}

const SEED = /^tinymoe:seed:(\d{1,9})$/

/** WeightsUnavailable's reason for a `job:<id>` that has announced no weights yet. */
export const NOTHING_PUBLISHED = "that job has published none"

export const resolvePolicyRef = (
  bus: BusShape,
  subjects: Subjects,
  ref: string,
  vocabSize: number,
  kernels?: Kernels,
): Effect.Effect<ResolvedPolicy, BusError | WeightsUnavailable> =>
  Effect.gen(function* () {
    const seeded = ref === "" || ref === "tinymoe:init" ? ["", "0"] : SEED.exec(ref)
    if (seeded !== null) {
      const seed = Number(seeded[1])
      return {
        model: TinyMoe.create({ config: { vocabSize }, seed, ...(kernels ? { kernels } : {}) }),
        version: 0n,
      }
    }
    if (ref.startsWith("job:")) {
      const job = ref.slice(4)
      const kv = yield* bus.kv(subjects.weightsBucket)
      const found = yield* kv.get(latestKey(job))
      if (Option.isNone(found))
        return yield* new WeightsUnavailable({ name: ref, reason: NOTHING_PUBLISHED })
      const announcement = fromBinary(WeightsAnnouncementSchema, found.value.value)
      return {
        model: yield* fetchWeights(bus, announcement, kernels),
        version: announcement.policyVersion,
      }
    }
    const store = yield* bus.objectStore(subjects.weightsBucket)
    const bytes = yield* store.get(ref)
    if (Option.isNone(bytes))
      return yield* new WeightsUnavailable({
        name: ref,
        reason: `neither tinymoe:init, tinymoe:seed:N, job:<id> nor an object in ${subjects.weightsBucket}`,
      })
    return yield* Effect.try({
      try: () => {
        const decoded = decodeWeights(bytes.value, "f32", kernels)
        return { model: decoded.model, version: decoded.version ?? 0n }
      },
      catch: (e) => new WeightsUnavailable({ name: ref, reason: String(e) }),
    })
  })
