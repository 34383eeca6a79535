import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Data, Effect, Option } from "effect"
import {
  type Batch,
  BatchSchema,
  type ObjectRef,
  type TakeBatchRequest,
  TakeBatchRequestSchema,
  type Trajectory,
  TrajectorySchema,
} from "../../proto/index.ts"
import { ERROR_HEADER } from "../../services/actor/index.ts"
import type { BusError, BusShape, Subjects } from "../../services/bus/index.ts"
import { sha256Hex } from "./names.ts"

/** The buffer answered with an error, or its answer could not be used. */
export class BufferClientError extends Data.TaggedError("BufferClientError")<{
  readonly jobId: string
  readonly reason: string
}> {
  override get message(): string {
    return `buffer of job ${this.jobId}: ${this.reason}`
  }
}

/** A TakeBatchRequest: the job, and any other field (unset fields are 0 / false / empty). */
export type TakeBatchParams = { readonly jobId: string } & Partial<
  Omit<TakeBatchRequest, "$typeName" | "$unknown" | "jobId">
>

export interface TakeBatchOptions {
  /** Reply deadline; default the request's wait_ms plus 30 s. */
  readonly timeoutMs?: number
  /**
   * Resolve object-store references into trajectories (default). False: the batch as the buffer
   * served it, its large trajectories still `trajectory_refs` (what the Trainer API hands on).
   */
  readonly resolveRefs?: boolean
}

const fetchTrajectory = (bus: BusShape, jobId: string, ref: ObjectRef) =>
  Effect.gen(function* () {
    const store = yield* bus.objectStore(ref.bucket)
    const found = yield* store.get(ref.name)
    if (Option.isNone(found))
      return yield* new BufferClientError({
        jobId,
        reason: `trajectory ${ref.bucket}/${ref.name} is not in the object store`,
      })
    const bytes = found.value
    if (ref.sha256 !== "" && sha256Hex(bytes) !== ref.sha256)
      return yield* new BufferClientError({
        jobId,
        reason: `trajectory ${ref.bucket}/${ref.name} does not match its sha256`,
      })
    return yield* Effect.try({
      try: (): Trajectory => fromBinary(TrajectorySchema, bytes),
      catch: (e) =>
        new BufferClientError({
          jobId,
          reason: `object ${ref.bucket}/${ref.name} is not a Trajectory: ${String(e)}`,
        }),
    })
  })

/**
 * Fetches the trajectories a batch references in the object store, appends them to
 * `trajectories` (so `weights` lines up with `trajectories`) and clears `trajectory_refs`.
 */
export const resolveBatch = (
  bus: BusShape,
  batch: Batch,
): Effect.Effect<Batch, BufferClientError | BusError> =>
  Effect.gen(function* () {
    if (batch.trajectoryRefs.length === 0) return batch
    const fetched = yield* Effect.forEach(
      batch.trajectoryRefs,
      (ref) => fetchTrajectory(bus, batch.jobId, ref),
      { concurrency: 4 },
    )
    return create(BatchSchema, {
      ...batch,
      trajectories: [...batch.trajectories, ...fetched],
      trajectoryRefs: [],
    })
  })

/**
 * Takes a batch from the job's buffer (`<prefix>.buffer.<job>.take`), with object-store
 * references resolved into trajectories unless `resolveRefs` is false. Pass the previous batch's id as
 * `ackBatchId` to confirm it; an unconfirmed batch is served again after the buffer's timeout.
 */
export const takeBatch = (
  bus: BusShape,
  subjects: Subjects,
  request: TakeBatchParams,
  options: TakeBatchOptions = {},
): Effect.Effect<Batch, BufferClientError | BusError> =>
  Effect.gen(function* () {
    const req = create(TakeBatchRequestSchema, request)
    const reply = yield* bus.request(
      subjects.bufferTake(req.jobId),
      toBinary(TakeBatchRequestSchema, req),
      { timeoutMs: options.timeoutMs ?? req.waitMs + 30_000 },
    )
    const error = reply.headers[ERROR_HEADER]
    if (error !== undefined)
      return yield* new BufferClientError({ jobId: req.jobId, reason: error })
    const batch = yield* Effect.try({
      try: () => fromBinary(BatchSchema, reply.data),
      catch: (e) =>
        new BufferClientError({ jobId: req.jobId, reason: `not a Batch: ${String(e)}` }),
    })
    return options.resolveRefs === false ? batch : yield* resolveBatch(bus, batch)
  })
