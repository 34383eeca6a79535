/**
 * The coordinator's view of the job store: JobStatus values (protobuf) keyed by job id in the KV
 * bucket `<prefix>-jobs`, and each job's JobEvent log on `<prefix>.jobs.<job>.events` (JetStream,
 * Nats-Msg-Id `<job>:<seq>`). The gateway owns the public side of the same store; this adapter
 * keeps its encoding, so either can read what the other wrote.
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Data, Effect, Option, type Scope, Stream } from "effect"
import {
  ErrorCode,
  ErrorDetailSchema,
  type JobEvent,
  JobEventSchema,
  type JobStatus,
  JobStatusSchema,
} from "../../proto/index.ts"
import type {
  BusError,
  BusShape,
  KvConflict,
  PublishAck,
  Subjects,
} from "../../services/bus/index.ts"
import {
  allJobEvents,
  ensureJobEventsStream,
  isCancelRequested,
  isTerminalState,
  jobEventMsgId,
  jobEventsStream,
  laterSeq,
} from "../../services/jobs/index.ts"

export interface StoredJob {
  readonly jobId: string
  readonly status: JobStatus
  /** KV revision of the value, for compare-and-set. */
  readonly revision: number
}

export type JobChange =
  | { readonly _tag: "Put"; readonly job: StoredJob }
  | { readonly _tag: "Deleted"; readonly jobId: string }

/** The payload of a JobEvent (its oneof), without job id, seq and time. */
export type JobEventPayload = JobEvent["event"]

export class JobNotFound extends Data.TaggedError("JobNotFound")<{ readonly jobId: string }> {
  override get message(): string {
    return `job ${this.jobId} is not in the job store`
  }
}

export interface JobStorePort {
  /** Every job now in the store, then every change. Undecodable values are skipped. */
  readonly watch: Effect.Effect<Stream.Stream<JobChange, BusError>, BusError, Scope.Scope>
  readonly list: Effect.Effect<ReadonlyArray<StoredJob>, BusError>
  readonly get: (jobId: string) => Effect.Effect<Option.Option<StoredJob>, BusError>
  /** Stores a new job; fails with KvConflict when the id is taken. */
  readonly create: (status: JobStatus) => Effect.Effect<number, BusError | KvConflict>
  /** Compare-and-set on the job's revision; returns the new revision. */
  readonly update: (
    jobId: string,
    status: JobStatus,
    revision: number,
  ) => Effect.Effect<number, BusError | KvConflict>
  /**
   * Publishes an event whose seq the caller has reserved (Nats-Msg-Id `<job>:<seq>`, so a
   * repeat of the same seq is stored once).
   */
  readonly publishEvent: (event: JobEvent) => Effect.Effect<PublishAck, BusError>
  /**
   * Appends one event as the gateway's job store does: published at last_event_seq + 1, or the
   * next number when the stream reports that seq taken (the Nats-Msg-Id is the claim on it),
   * then last_event_seq moved up to it (with `mutate` applied) under compare-and-set.
   */
  readonly appendEvent: (
    jobId: string,
    payload: JobEventPayload,
    mutate?: (status: JobStatus) => JobStatus,
  ) => Effect.Effect<JobEvent, BusError | JobNotFound>
}

export {
  allJobEvents,
  ensureJobEventsStream,
  isCancelRequested,
  isTerminalState,
  jobEventMsgId,
  jobEventsStream,
  laterSeq,
}

const decodeStatus = (jobId: string, bytes: Uint8Array): JobStatus | undefined => {
  try {
    const status = fromBinary(JobStatusSchema, bytes)
    return status.jobId === "" ? { ...status, jobId } : status
  } catch {
    return undefined
  }
}

/** The job store over the bus: KV bucket `subjects.jobsBucket` and the job event stream. */
export const busJobStore = (
  bus: BusShape,
  subjects: Subjects,
): Effect.Effect<JobStorePort, BusError> =>
  Effect.gen(function* () {
    const kv = yield* bus.kv(subjects.jobsBucket)
    yield* ensureJobEventsStream(bus, subjects)
    const get = (jobId: string) =>
      kv.get(jobId).pipe(
        Effect.map((found) =>
          Option.flatMap(found, (e) => {
            const status = decodeStatus(jobId, e.value)
            return status === undefined
              ? Option.none()
              : Option.some<StoredJob>({ jobId, status, revision: e.revision })
          }),
        ),
      )
    const publishEvent = (event: JobEvent) =>
      bus.jsPublish(subjects.jobEvents(event.jobId), toBinary(JobEventSchema, event), {
        msgId: jobEventMsgId(event.jobId, event.seq),
      })
    const update = (jobId: string, status: JobStatus, revision: number) =>
      kv.update(jobId, toBinary(JobStatusSchema, status), revision)

    const appendEvent = (
      jobId: string,
      payload: JobEventPayload,
      mutate: (status: JobStatus) => JobStatus = (s) => s,
    ): Effect.Effect<JobEvent, BusError | JobNotFound> =>
      Effect.gen(function* () {
        const found = yield* get(jobId)
        if (Option.isNone(found)) return yield* new JobNotFound({ jobId })
        const event = create(JobEventSchema, {
          jobId,
          seq: found.value.status.lastEventSeq + 1n,
          unixMs: BigInt(Date.now()),
          event: payload,
        })
        // The Nats-Msg-Id claims the number: a duplicate means another writer stored that seq.
        while ((yield* publishEvent(event)).duplicate) event.seq += 1n
        for (;;) {
          const current = yield* get(jobId)
          if (Option.isNone(current)) return yield* new JobNotFound({ jobId })
          const { status, revision } = current.value
          const next = create(JobStatusSchema, {
            ...mutate(status),
            lastEventSeq: laterSeq(status.lastEventSeq, event.seq),
            updatedUnixMs: BigInt(Date.now()),
          })
          const won = yield* update(jobId, next, revision).pipe(
            Effect.as(true),
            Effect.catchTag("KvConflict", () => Effect.succeed(false)),
          )
          if (won) return event
        }
      })

    const store: JobStorePort = {
      watch: Effect.map(kv.watch(), (entries) =>
        entries.pipe(
          Stream.map((e): JobChange | undefined => {
            if (e.operation === "delete") return { _tag: "Deleted", jobId: e.key }
            const status = decodeStatus(e.key, e.value)
            return status === undefined
              ? undefined
              : { _tag: "Put", job: { jobId: e.key, status, revision: e.revision } }
          }),
          Stream.filter((c): c is JobChange => c !== undefined),
        ),
      ),
      list: Effect.flatMap(kv.keys, (keys) =>
        Effect.map(Effect.forEach(keys, get), (found) =>
          found.flatMap((o) => (Option.isSome(o) ? [o.value] : [])),
        ),
      ),
      get,
      create: (status) => kv.create(status.jobId, toBinary(JobStatusSchema, status)),
      update,
      publishEvent,
      appendEvent,
    }
    return store
  })

/**
 * Asks for a job to be cancelled (what CancelJob does): marks it as in isCancelRequested.
 * Returns the status written, or the unchanged status of a job that is already terminal.
 */
export const requestCancel = (
  store: JobStorePort,
  jobId: string,
  reason: string,
): Effect.Effect<JobStatus, BusError | JobNotFound> =>
  Effect.gen(function* () {
    for (;;) {
      const found = yield* store.get(jobId)
      if (Option.isNone(found)) return yield* new JobNotFound({ jobId })
      const { status, revision } = found.value
      if (isTerminalState(status.state) || isCancelRequested(status)) return status
      const next = create(JobStatusSchema, {
        ...status,
        error: create(ErrorDetailSchema, {
          code: ErrorCode.CANCELLED,
          message: reason || "cancelled by the client",
        }),
        updatedUnixMs: BigInt(Date.now()),
      })
      const won = yield* store.update(jobId, next, revision).pipe(
        Effect.as(true),
        Effect.catchTag("KvConflict", () => Effect.succeed(false)),
      )
      if (won) return next
    }
  })
