/**
 * Which batch an external trainer of a job was last served, which it trained on, and the last
 * step it reported: KV `<prefix>-trainer-batches`, key `<job>`. The next take confirms the served batch to the buffer
 * when the trainer names it (ack_batch_id) or when a published version trained on it, so a
 * trainer restarted between publishing and its next take is not served that batch again.
 */
import { Effect, Option, Result, Schema } from "effect"
import type { BusError, KvBucket } from "../../services/bus/index.ts"

const RecordJson = Schema.Struct({
  /** The lease the batch was served to. */
  leaseId: Schema.String,
  /** The batch last served; "" when the last take returned nothing. */
  served: Schema.String,
  /** A batch a published version trained on (confirmed by the next take). */
  trained: Schema.String,
  /** The last learner step recorded as a job event (with the version that published it). */
  reportedStep: Schema.Number,
  /**
   * Reports of steps whose version is not published yet (encoded TrainStepReports, base64):
   * recorded as job events when it is, so the events name what the published weights trained on.
   */
  pending: Schema.Array(Schema.String),
})
export type BatchRecord = typeof RecordJson.Type

const decode = Schema.decodeUnknownResult(Schema.fromJsonString(RecordJson))
const encode = (r: BatchRecord) => new TextEncoder().encode(JSON.stringify(r))

export const EMPTY_RECORD: BatchRecord = {
  leaseId: "",
  served: "",
  trained: "",
  reportedStep: 0,
  pending: [],
}

export const readBatchRecord = (
  kv: KvBucket,
  jobId: string,
): Effect.Effect<BatchRecord, BusError> =>
  Effect.map(kv.get(jobId), (found) => {
    if (Option.isNone(found)) return EMPTY_RECORD
    const r = decode(new TextDecoder().decode(found.value.value))
    return Result.isSuccess(r) ? r.success : EMPTY_RECORD
  })

export const writeBatchRecord = (
  kv: KvBucket,
  jobId: string,
  record: BatchRecord,
): Effect.Effect<void, BusError> => Effect.asVoid(kv.put(jobId, encode(record)))
