import { createHash } from "node:crypto"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Clock, Data, Effect, Option, Stream } from "effect"
import { decodeWeights, encodeWeights, type Kernels, type TinyMoe } from "../../model/index.ts"
import { type WeightsAnnouncement, WeightsAnnouncementSchema } from "../../proto/index.ts"
import type { BusError, BusShape, Subjects } from "../bus/index.ts"

export class WeightsUnavailable extends Data.TaggedError("WeightsUnavailable")<{
  readonly name: string
  readonly reason: string
}> {
  override get message(): string {
    return `weights ${this.name}: ${this.reason}`
  }
}

/** KV key of a job's latest announcement, so a sampler that starts late finds it. */
export const latestKey = (job: string): string => `${job}.latest`

/**
 * KV key of one version's announcement. Every version a job publishes is kept (its bytes under
 * `<job>/v<version>.safetensors`, this record beside them) for as long as the weights bucket
 * is: nothing deletes them, during the job or after it ends, so any version stays readable.
 */
export const versionKey = (job: string, version: bigint): string => `${job}.v${version}`

/**
 * Publishes a policy version: the safetensors bytes into the object store (`<prefix>-weights`,
 * name `<job>/v<version>.safetensors`), the announcement into KV (per version, and as the job's
 * latest) and on `<prefix>.weights.<job>`.
 */
export const publishWeights = (
  bus: BusShape,
  subjects: Subjects,
  job: string,
  model: TinyMoe,
  version: bigint,
  step: bigint,
): Effect.Effect<WeightsAnnouncement, BusError> =>
  publishWeightBytes(
    bus,
    subjects,
    job,
    encodeWeights(model, "F32", { version, extra: { job, step: step.toString() } }),
    version,
    step,
  )

/**
 * Publishes a policy version already encoded (an external trainer's safetensors file, checked by
 * the caller): stored and announced exactly as {@link publishWeights} does.
 */
export const publishWeightBytes = (
  bus: BusShape,
  subjects: Subjects,
  job: string,
  bytes: Uint8Array,
  version: bigint,
  step: bigint,
): Effect.Effect<WeightsAnnouncement, BusError> =>
  Effect.gen(function* () {
    const name = `${job}/v${version}.safetensors`
    const store = yield* bus.objectStore(subjects.weightsBucket)
    yield* store.put(name, bytes)
    const announcement = create(WeightsAnnouncementSchema, {
      jobId: job,
      policyVersion: version,
      bucket: subjects.weightsBucket,
      name,
      sha256: createHash("sha256").update(bytes).digest("hex"),
      sizeBytes: BigInt(bytes.length),
      createdUnixMs: BigInt(yield* Clock.currentTimeMillis),
      format: "safetensors",
      step,
    })
    const encoded = toBinary(WeightsAnnouncementSchema, announcement)
    const kv = yield* bus.kv(subjects.weightsBucket)
    // The version's own record first: whoever sees it as the latest can also find it by number.
    yield* kv.put(versionKey(job, version), encoded)
    yield* kv.put(latestKey(job), encoded)
    yield* bus.publish(subjects.weights(job), encoded)
    return announcement
  })

/** The job's latest announcement, if it published any. */
export const latestAnnouncement = (
  bus: BusShape,
  subjects: Subjects,
  job: string,
): Effect.Effect<WeightsAnnouncement | undefined, BusError> =>
  Effect.gen(function* () {
    const kv = yield* bus.kv(subjects.weightsBucket)
    const found = yield* kv.get(latestKey(job))
    return Option.isNone(found)
      ? undefined
      : fromBinary(WeightsAnnouncementSchema, found.value.value)
  })

/**
 * The announcement of one of the job's versions, if it published it. A version published before
 * versions had records of their own is found by its object (digest and size from its bytes,
 * step unknown: 0).
 */
export const versionAnnouncement = (
  bus: BusShape,
  subjects: Subjects,
  job: string,
  version: bigint,
): Effect.Effect<WeightsAnnouncement | undefined, BusError> =>
  Effect.gen(function* () {
    const kv = yield* bus.kv(subjects.weightsBucket)
    const found = yield* kv.get(versionKey(job, version))
    if (Option.isSome(found)) return fromBinary(WeightsAnnouncementSchema, found.value.value)
    const latest = yield* latestAnnouncement(bus, subjects, job)
    if (latest?.policyVersion === version) return latest
    const name = `${job}/v${version}.safetensors`
    const bytes = yield* (yield* bus.objectStore(subjects.weightsBucket)).get(name)
    if (Option.isNone(bytes)) return undefined
    return create(WeightsAnnouncementSchema, {
      jobId: job,
      policyVersion: version,
      bucket: subjects.weightsBucket,
      name,
      sha256: createHash("sha256").update(bytes.value).digest("hex"),
      sizeBytes: BigInt(bytes.value.length),
      format: "safetensors",
    })
  })

/** The announced weights file's bytes, its digest checked. */
export const fetchWeightBytes = (
  bus: BusShape,
  announcement: WeightsAnnouncement,
): Effect.Effect<Uint8Array, BusError | WeightsUnavailable> =>
  Effect.gen(function* () {
    const store = yield* bus.objectStore(announcement.bucket)
    const found = yield* store.get(announcement.name)
    if (Option.isNone(found))
      return yield* new WeightsUnavailable({
        name: announcement.name,
        reason: "not in the object store",
      })
    const digest = createHash("sha256").update(found.value).digest("hex")
    if (digest !== announcement.sha256) {
      return yield* new WeightsUnavailable({
        name: announcement.name,
        reason: `sha256 ${digest} ≠ announced ${announcement.sha256}`,
      })
    }
    return found.value
  })

/**
 * One of the job's versions (the latest when `version` is undefined): its announcement and its
 * bytes, digest checked; undefined when the job never published it.
 */
export const readVersion = (
  bus: BusShape,
  subjects: Subjects,
  job: string,
  version: bigint | undefined,
): Effect.Effect<
  { readonly announcement: WeightsAnnouncement; readonly bytes: Uint8Array } | undefined,
  BusError | WeightsUnavailable
> =>
  Effect.gen(function* () {
    const announcement =
      version === undefined
        ? yield* latestAnnouncement(bus, subjects, job)
        : yield* versionAnnouncement(bus, subjects, job, version)
    if (announcement === undefined) return undefined
    return { announcement, bytes: yield* fetchWeightBytes(bus, announcement) }
  })

/** Fetches announced weights and checks their digest. */
export const fetchWeights = (
  bus: BusShape,
  announcement: WeightsAnnouncement,
  kernels?: Kernels,
): Effect.Effect<TinyMoe, BusError | WeightsUnavailable> =>
  Effect.gen(function* () {
    const bytes = yield* fetchWeightBytes(bus, announcement)
    return yield* Effect.try({
      try: () => decodeWeights(bytes, "f32", kernels).model,
      catch: (e) => new WeightsUnavailable({ name: announcement.name, reason: String(e) }),
    })
  })

/**
 * Keeps a sampler's embedded policy on the learner's latest weights: the latest announcement at
 * start-up, then every newer one on `<prefix>.weights.<job>`. A version not newer than the one
 * in use is ignored, so a replayed or reordered announcement never goes back.
 */
export const followWeights = (
  bus: BusShape,
  subjects: Subjects,
  job: string,
  target: { readonly version: bigint; setWeights(model: TinyMoe, version: bigint): void },
  kernels?: Kernels,
) =>
  Effect.gen(function* () {
    const apply = (bytes: Uint8Array) =>
      Effect.gen(function* () {
        // Undecodable bytes are a failure, ignored below like any bad announcement, not a defect.
        const a = yield* Effect.try({
          try: () => fromBinary(WeightsAnnouncementSchema, bytes),
          catch: (e) =>
            new WeightsUnavailable({ name: "announcement", reason: `undecodable: ${String(e)}` }),
        })
        if (a.policyVersion <= target.version) return
        const model = yield* fetchWeights(bus, a, kernels)
        target.setWeights(model, a.policyVersion)
        yield* Effect.logInfo(`sampler: weights v${a.policyVersion} (step ${a.step}) in use`)
      }).pipe(
        Effect.catch((e) =>
          Effect.logWarning(`sampler: ignoring a weights announcement: ${String(e)}`),
        ),
      )
    const messages = yield* bus.subscribe(subjects.weights(job))
    const kv = yield* bus.kv(subjects.weightsBucket)
    const latest = yield* kv.get(latestKey(job))
    if (Option.isSome(latest)) yield* apply(latest.value.value)
    return yield* messages.pipe(
      Stream.runForEach((m) => apply(m.data)),
      Effect.forkScoped,
    )
  })
