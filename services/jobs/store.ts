/**
 * The job store: the one place jobs are kept, read by the gateway (the public side), the
 * coordinator (admission, progress, the end), the pools (which jobs to claim) and the CLI.
 * Used as the {@link JobStore} service (a Context tag: `jobStoreLayer(subjects)` over whichever
 * Bus layer runs — NATS or in memory) or built directly with {@link makeJobStore}.
 *
 * Storage (through the Bus service, so the same code runs on NATS and on the in-memory bus):
 * - KV bucket `subjects.jobsBucket` (`<prefix>-jobs`): key = job id, value = the job's
 *   `JobStatus` (spec included), protobuf-encoded. Every write is a compare-and-set on the key's
 *   revision, retried on conflict, so concurrent gateways and the coordinator never lose updates.
 * - JetStream stream {@link jobEventsStream} (`<PREFIX>_JOB_EVENTS`, limits retention, file
 *   storage) on `<prefix>.jobs.*.events`: job `J`'s `JobEvent`s are published on
 *   `subjects.jobEvents(J)` with Nats-Msg-Id `J:<seq>` ({@link jobEventMsgId}). `seq` is 1-based
 *   and contiguous per job. The msg id is the claim on a number: appendEvent publishes at
 *   `last_event_seq + 1`, and when the stream reports a duplicate (someone stored that seq
 *   already) tries the next number, so a number is only tried once all below it are stored (no
 *   gaps, stream order = seq order, as long as numbers are claimed within the one-hour duplicate
 *   window). Then `JobStatus.last_event_seq` is moved up to it (it may lag, never leads).
 * - WatchJob reads a job's events with a consumer of its own, filtered to the job's subject, from
 *   the start of the stream; on NATS an ephemeral consumer that the server also removes when it
 *   is idle for a minute, on the in-memory bus a durable one that is detached afterwards.
 *
 * Cancellation follows the coordinator's protocol (JobState has no CANCELLING): a PENDING job
 * (not admitted yet) is moved to CANCELLED at once, with its state_changed event; a RUNNING job
 * gets a cancel request, `error = { code: ERROR_CODE_CANCELLED, message: reason }` with its state
 * unchanged, and the coordinator moves it to CANCELLED once its episodes have stopped.
 *
 * API (every operation is an Effect; errors are typed):
 *
 *   const store = yield* makeJobStore(bus, subjects)   // opens the bucket, ensures the stream
 *   const store = yield* JobStore                      // the service (jobStoreLayer)
 *   store.create(spec, { requestId? })   → { status, created }   PENDING + first event
 *   store.get(jobId)                     → JobStatus              JobNotFound
 *   store.find(jobId)                    → Option<JobStatus>
 *   store.update(jobId, fn)              → JobStatus   CAS loop; fn may mutate and return its
 *                                          argument, or return an Effect (fail to abort)
 *   store.list({ state? }, pageToken, pageSize) → { jobs, nextPageToken }   newest first
 *   store.transition(jobId, state, { error? })  → { status, event }   state + state_changed event
 *   store.cancel(jobId, reason)          → JobStatus   JobTerminal when already terminal
 *   store.appendEvent(jobId, event)      → JobEvent (with job_id, seq, unix_ms filled in)
 *   store.watch(jobId, fromSeq)          → Stream<JobEvent>: history from fromSeq, then live,
 *                                          ending after the event that makes the job terminal
 *   store.changes                        → Stream<JobStatus>: every job now, then every change
 *
 * For a writer that keeps its own view of a job and writes it under compare-and-set (the
 * coordinator, whose job ledger numbers its events before it publishes them):
 *
 *   store.getStored(jobId)               → Option<StoredJob>   status and KV revision
 *   store.storedChanges                  → (scoped) Stream<JobChange>: every job now with its
 *                                          revision, then every write and delete
 *   store.compareAndSet(jobId, status, revision) → new revision   KvConflict when it lost
 *   store.publishEvent(event)            → PublishAck   at the seq the event carries
 *                                          (a duplicate ack: that seq is stored already)
 *   appendJobEvent(bus, subjects, jobId, event)   one-off appendEvent
 *
 * `update` keeps `job_id`, `created_unix_ms` and `last_event_seq` (only appendEvent moves it) and
 * sets `updated_unix_ms`. Changing `state` through `update` records no event: use `transition`.
 */
import { createHash, randomBytes } from "node:crypto"
import { create, equals, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf"
import { Clock, Context, Effect, Layer, Option, type Scope, Stream } from "effect"
import {
  ErrorCode,
  ErrorDetailSchema,
  JobCountsSchema,
  type JobEvent,
  JobEventSchema,
  type JobSpec,
  JobSpecSchema,
  JobState,
  type JobStatus,
  JobStatusSchema,
} from "../../proto/index.ts"
import {
  Bus,
  type BusError,
  type BusShape,
  JetStreamError,
  type KvBucket,
  type KvConflict,
  type PublishAck,
  type Subjects,
} from "../bus/index.ts"
import {
  InvalidArgument,
  JobAlreadyExists,
  JobContended,
  JobCorrupt,
  JobNotFound,
  JobTerminal,
} from "./errors.ts"
import {
  ensureJobEventsStream,
  isTerminalEvent,
  isTerminalState,
  jobEventMsgId,
  jobEventsStream,
} from "./events.ts"

export type JobEventInit = MessageInitShape<typeof JobEventSchema>
/** The payload of a JobEvent (its oneof), without job id, seq and time. */
export type JobEventPayload = JobEvent["event"]

/** Job ids and other ids that become NATS subject tokens and KV keys (common.proto). */
export const JOB_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/
export type ErrorDetailInit = MessageInitShape<typeof ErrorDetailSchema>

/** Job ids derived from an idempotency key are stable; others sort roughly by submission time. */
export const newJobId = (requestId: string | undefined, nowMs: number): string => {
  if (requestId !== undefined && requestId !== "") {
    return `job-${createHash("sha256").update(`t1-request:${requestId}`).digest("hex").slice(0, 24)}`
  }
  return `job-${nowMs.toString(36)}-${randomBytes(6).toString("hex")}`
}

/** How long a watch holds a terminal event for the status that follows it. */
export const STATUS_SETTLE_MS = 10_000
const STATUS_SETTLE_POLL_MS = 20

export const DEFAULT_PAGE_SIZE = 50
export const MAX_PAGE_SIZE = 1000
/** Compare-and-set attempts before an update gives up with JobContended. */
const MAX_CAS_ATTEMPTS = 50

export type JobStoreError = BusError | JobCorrupt | JobContended

export interface JobPage {
  /** Newest first (created_unix_ms, then job id, descending). */
  readonly jobs: ReadonlyArray<JobStatus>
  /** Empty on the last page. */
  readonly nextPageToken: string
}

/** A job's status as stored, with the KV revision a compare-and-set names. */
export interface StoredJob {
  readonly jobId: string
  readonly status: JobStatus
  readonly revision: number
}

export type JobChange =
  | { readonly _tag: "Put"; readonly job: StoredJob }
  | { readonly _tag: "Deleted"; readonly jobId: string }

export interface JobStoreShape {
  /** The names (bucket, event subjects) the store is kept under. */
  readonly subjects: Subjects
  /**
   * Stores a new PENDING job and appends its first event (state_changed to PENDING). With a
   * requestId the job id is derived from it: resubmitting an equal spec returns the existing job
   * (`created: false`); a different spec fails with JobAlreadyExists. The spec is not validated
   * here (see validateJobSpec).
   */
  readonly create: (
    spec: JobSpec,
    options?: { readonly requestId?: string },
  ) => Effect.Effect<
    { readonly status: JobStatus; readonly created: boolean },
    JobAlreadyExists | JobNotFound | JobStoreError
  >
  readonly get: (jobId: string) => Effect.Effect<JobStatus, JobNotFound | JobStoreError>
  readonly find: (jobId: string) => Effect.Effect<Option.Option<JobStatus>, JobStoreError>
  readonly update: <E = never>(
    jobId: string,
    fn: (current: JobStatus) => JobStatus | Effect.Effect<JobStatus, E>,
  ) => Effect.Effect<JobStatus, E | JobNotFound | JobStoreError>
  readonly list: (
    filter: { readonly state?: JobState },
    pageToken?: string,
    pageSize?: number,
  ) => Effect.Effect<JobPage, InvalidArgument | JobStoreError>
  /**
   * Moves a non-terminal job to `state` and appends a state_changed event (with `error`, which
   * is also stored in the status when the state is FAILED). Moving to the current state, or from a
   * state not in `from` when given, changes nothing (`event` undefined). A terminal job fails
   * with JobTerminal.
   */
  readonly transition: (
    jobId: string,
    state: JobState,
    options?: { readonly error?: ErrorDetailInit; readonly from?: ReadonlyArray<JobState> },
  ) => Effect.Effect<
    { readonly status: JobStatus; readonly event: JobEvent | undefined },
    JobTerminal | JobNotFound | JobStoreError
  >
  /** transition to CANCELLED, the reason recorded in the event's error (ERROR_CODE_CANCELLED). */
  readonly cancel: (
    jobId: string,
    reason?: string,
  ) => Effect.Effect<JobStatus, JobTerminal | JobNotFound | JobStoreError>
  /** Stores the event under the job's next seq; job_id and seq are set, unix_ms when 0. */
  readonly appendEvent: (
    jobId: string,
    event: JobEventInit,
  ) => Effect.Effect<JobEvent, JobNotFound | JobStoreError>
  /**
   * The job's events with seq >= fromSeq (0 and 1 both mean all): the stored ones, then live ones,
   * ending after the terminal state_changed event (at once when the job is terminal and nothing at
   * or after fromSeq is left). JobNotFound when the job does not exist.
   */
  readonly watch: (
    jobId: string,
    fromSeq?: bigint,
  ) => Stream.Stream<JobEvent, JobNotFound | JobStoreError>
  /** Every stored job now, then each job's new status whenever it is written. */
  readonly changes: Stream.Stream<JobStatus, JobStoreError>
  /** The job's status and revision; none when absent or undecodable (logged). */
  readonly getStored: (jobId: string) => Effect.Effect<Option.Option<StoredJob>, BusError>
  /**
   * Every job now in the store with its revision, then every write and delete; undecodable
   * values are skipped.
   */
  readonly storedChanges: Effect.Effect<Stream.Stream<JobChange, BusError>, BusError, Scope.Scope>
  /** Writes `status` if the job is still at `revision`; returns the new revision. */
  readonly compareAndSet: (
    jobId: string,
    status: JobStatus,
    revision: number,
  ) => Effect.Effect<number, BusError | KvConflict>
  /**
   * Publishes an event at the seq it carries (Nats-Msg-Id `<job>:<seq>`, so a repeat of a seq is
   * stored once and acked as a duplicate). Leaves last_event_seq to the caller.
   */
  readonly publishEvent: (event: JobEvent) => Effect.Effect<PublishAck, BusError>
}

/** The job store as a service; see {@link jobStoreLayer}. */
export class JobStore extends Context.Service<JobStore, JobStoreShape>()("t1/JobStore") {}

const decodeStatus = (key: string, bytes: Uint8Array) =>
  Effect.try({
    try: () => fromBinary(JobStatusSchema, bytes),
    catch: (cause) => new JobCorrupt({ key, reason: String(cause) }),
  })

const decodeEvent = (key: string, bytes: Uint8Array) =>
  Effect.try({
    try: () => fromBinary(JobEventSchema, bytes),
    catch: (cause) => new JobCorrupt({ key, reason: String(cause) }),
  })

const encodeStatus = (status: JobStatus) => toBinary(JobStatusSchema, status)

/** Short, jittered pauses between compare-and-set attempts. */
const backoff = (attempt: number) => Effect.sleep(Math.min(50, 2 * attempt) * (0.5 + Math.random()))

/** Tries a KV write; false when the compare-and-set lost. */
const tryWrite = (write: Effect.Effect<number, BusError | KvConflict>) =>
  write.pipe(
    Effect.as(true),
    Effect.catchTag("KvConflict", () => Effect.succeed(false)),
  )

const pageToken = {
  encode: (s: JobStatus): string =>
    Buffer.from(`${s.createdUnixMs}.${s.jobId}`, "utf8").toString("base64url"),
  decode: (token: string): { created: bigint; jobId: string } | undefined => {
    const text = Buffer.from(token, "base64url").toString("utf8")
    const match = /^(\d{1,19})\.([A-Za-z0-9_-]{1,128})$/.exec(text)
    if (match === null || match[1] === undefined || match[2] === undefined) return undefined
    return { created: BigInt(match[1]), jobId: match[2] }
  },
}

/** Newest first: created_unix_ms descending, then job id descending. */
const newestFirst = (a: JobStatus, b: JobStatus): number => {
  if (a.createdUnixMs !== b.createdUnixMs) return a.createdUnixMs > b.createdUnixMs ? -1 : 1
  return a.jobId === b.jobId ? 0 : a.jobId > b.jobId ? -1 : 1
}

/** Opens (creating when needed) the job bucket and event stream; returns the store over them. */
export const makeJobStore = (
  bus: BusShape,
  subjects: Subjects,
): Effect.Effect<JobStoreShape, BusError> =>
  Effect.gen(function* () {
    const jobs = yield* bus.kv(subjects.jobsBucket)
    yield* ensureJobEventsStream(bus, subjects)
    return storeOver(bus, subjects, jobs)
  })

/** The JobStore service over the Bus service: NATS or in memory, as the Bus layer is. */
export const jobStoreLayer = (subjects: Subjects): Layer.Layer<JobStore, BusError, Bus> =>
  Layer.effect(
    JobStore,
    Bus.use((bus) => makeJobStore(bus, subjects)),
  )

/**
 * The JobStore service when one is provided for these subjects (one store shared by the actors
 * of a process: `t1 serve`, `t1 up`), else a store over the bus.
 */
export const jobStoreFor = (
  bus: BusShape,
  subjects: Subjects,
): Effect.Effect<JobStoreShape, BusError> =>
  Effect.flatMap(Effect.serviceOption(JobStore), (provided) =>
    Option.isSome(provided) && provided.value.subjects.prefix === subjects.prefix
      ? Effect.succeed(provided.value)
      : makeJobStore(bus, subjects),
  )

/** How long an idle watch consumer outlives its reader on NATS (when the gateway died). */
const WATCH_CONSUMER_IDLE_MS = 60_000
const WATCH_ACK_WAIT_MS = 5 * 60_000
const NS_PER_MS = 1_000_000

interface JsApiReply {
  readonly error?: { readonly code?: number; readonly description?: string }
}

const parseJsApiReply = (data: Uint8Array): JsApiReply => {
  try {
    const parsed: unknown = JSON.parse(new TextDecoder().decode(data))
    return typeof parsed === "object" && parsed !== null ? (parsed as JsApiReply) : {}
  } catch {
    return { error: { description: "unparsable JetStream API reply" } }
  }
}

/**
 * A consumer that reads one job's events from the start of the stream. NATS: an ephemeral
 * consumer made through the JetStream API (a plain request), which the server removes once idle.
 * The in-memory bus has no JetStream API (no responders): a durable consumer there.
 */
const openEventReader = (bus: BusShape, stream: string, name: string, filterSubject: string) =>
  bus
    .request(
      `$JS.API.CONSUMER.CREATE.${stream}.${name}.${filterSubject}`,
      new TextEncoder().encode(
        JSON.stringify({
          stream_name: stream,
          config: {
            name,
            deliver_policy: "all",
            ack_policy: "explicit",
            ack_wait: WATCH_ACK_WAIT_MS * NS_PER_MS,
            max_deliver: -1,
            filter_subject: filterSubject,
            inactive_threshold: WATCH_CONSUMER_IDLE_MS * NS_PER_MS,
            // One copy in memory whatever --nats-replicas says: the reader is ephemeral (removed
            // when idle) and holds no data of its own: the events stay in the replicated stream,
            // and a watch can be opened again from any seq (watch(jobId, fromSeq)).
            mem_storage: true,
            num_replicas: 1,
          },
        }),
      ),
      { timeoutMs: 10_000 },
    )
    .pipe(
      Effect.flatMap((reply) => {
        const { error } = parseJsApiReply(reply.data)
        return error === undefined
          ? Effect.succeed<"nats" | "memory">("nats")
          : Effect.fail(
              new JetStreamError({
                operation: `create watch consumer ${stream}/${name}`,
                reason: error.description ?? `JetStream API error ${error.code}`,
              }),
            )
      }),
      Effect.catchTag("NoResponders", () =>
        bus
          .ensureConsumer({
            stream,
            durable: name,
            filterSubject,
            ackWaitMs: WATCH_ACK_WAIT_MS,
            maxDeliver: -1,
          })
          .pipe(Effect.as<"nats" | "memory">("memory")),
      ),
    )

/** Removes a watch consumer: deleted on NATS; on the in-memory bus pointed at nothing. */
const closeEventReader = (
  bus: BusShape,
  subjects: Subjects,
  stream: string,
  name: string,
  kind: "nats" | "memory",
) =>
  (kind === "nats"
    ? bus.request(`$JS.API.CONSUMER.DELETE.${stream}.${name}`, new Uint8Array(0), {
        timeoutMs: 5_000,
      })
    : bus.ensureConsumer({
        stream,
        durable: name,
        filterSubject: `${subjects.prefix}.jobs._closed_.events`,
        ackWaitMs: WATCH_ACK_WAIT_MS,
        maxDeliver: -1,
      })
  ).pipe(Effect.ignore)

const storeOver = (bus: BusShape, subjects: Subjects, jobs: KvBucket): JobStoreShape => {
  const stream = jobEventsStream(subjects)
  const find = (jobId: string) =>
    Effect.gen(function* () {
      const entry = yield* jobs.get(jobId)
      if (Option.isNone(entry)) return Option.none<JobStatus>()
      return Option.some(yield* decodeStatus(jobId, entry.value.value))
    })

  const get = (jobId: string) =>
    Effect.flatMap(find(jobId), (found) =>
      Option.isSome(found) ? Effect.succeed(found.value) : Effect.fail(new JobNotFound({ jobId })),
    )

  /** The CAS loop under update; `keepSeq` false lets appendEvent move last_event_seq. */
  const casUpdate = <E>(
    jobId: string,
    fn: (current: JobStatus) => JobStatus | undefined | Effect.Effect<JobStatus | undefined, E>,
    keepSeq: boolean,
  ): Effect.Effect<JobStatus, E | JobNotFound | JobStoreError> =>
    Effect.gen(function* () {
      for (let attempt = 1; ; attempt++) {
        const entry = yield* jobs.get(jobId)
        if (Option.isNone(entry)) return yield* new JobNotFound({ jobId })
        const current = yield* decodeStatus(jobId, entry.value.value)
        const kept = {
          jobId: current.jobId,
          createdUnixMs: current.createdUnixMs,
          lastEventSeq: current.lastEventSeq,
        }
        const result = fn(current)
        const next = Effect.isEffect(result) ? yield* result : result
        // undefined: nothing to change.
        if (next === undefined) return yield* decodeStatus(jobId, entry.value.value)
        next.jobId = kept.jobId
        next.createdUnixMs = kept.createdUnixMs
        if (keepSeq) next.lastEventSeq = kept.lastEventSeq
        next.updatedUnixMs = BigInt(yield* Clock.currentTimeMillis)
        const written = yield* tryWrite(
          jobs.update(jobId, encodeStatus(next), entry.value.revision),
        )
        if (written) return next
        if (attempt >= MAX_CAS_ATTEMPTS)
          return yield* new JobContended({ jobId, attempts: attempt })
        yield* backoff(attempt)
      }
    })

  const update = <E = never>(
    jobId: string,
    fn: (current: JobStatus) => JobStatus | Effect.Effect<JobStatus, E>,
  ) => casUpdate(jobId, fn, true)

  const appendEvent = (jobId: string, init: JobEventInit) =>
    Effect.gen(function* () {
      const status = yield* get(jobId)
      const event = create(JobEventSchema, init)
      event.jobId = jobId
      if (event.unixMs === 0n) event.unixMs = BigInt(yield* Clock.currentTimeMillis)
      let seq = status.lastEventSeq + 1n
      for (let probes = 1; ; probes++) {
        event.seq = seq
        const ack = yield* bus.jsPublish(
          subjects.jobEvents(jobId),
          toBinary(JobEventSchema, event),
          { msgId: jobEventMsgId(jobId, seq) },
        )
        if (!ack.duplicate) break
        // Taken by a concurrent writer (or last_event_seq lags): the next number.
        seq++
        if (probes >= 10_000) return yield* new JobContended({ jobId, attempts: probes })
      }
      const stored = seq
      yield* casUpdate<never>(
        jobId,
        (s) => {
          if (s.lastEventSeq >= stored) return undefined
          s.lastEventSeq = stored
          return s
        },
        false,
      )
      return event
    })

  const transition = (
    jobId: string,
    state: JobState,
    options: { readonly error?: ErrorDetailInit; readonly from?: ReadonlyArray<JobState> } = {},
  ) =>
    Effect.gen(function* () {
      let previous = JobState.UNSPECIFIED
      let changed = false
      const error =
        options.error === undefined ? undefined : create(ErrorDetailSchema, options.error)
      const status = yield* casUpdate<JobTerminal>(
        jobId,
        (s) => {
          changed = false
          if (s.state === state) return undefined
          if (options.from !== undefined && !options.from.includes(s.state)) return undefined
          if (isTerminalState(s.state)) {
            return Effect.fail(new JobTerminal({ jobId, state: s.state }))
          }
          previous = s.state
          changed = true
          s.state = state
          s.error = state === JobState.FAILED ? error : undefined
          return Effect.succeed(s)
        },
        true,
      )
      if (!changed) return { status, event: undefined }
      const event = yield* appendEvent(jobId, {
        event: {
          case: "stateChanged",
          value: { state, previousState: previous, ...(error === undefined ? {} : { error }) },
        },
      })
      if (status.lastEventSeq < event.seq) status.lastEventSeq = event.seq
      return { status, event }
    })

  const cancel = (jobId: string, reason = "") =>
    Effect.gen(function* () {
      const error = create(ErrorDetailSchema, {
        code: ErrorCode.CANCELLED,
        message: reason === "" ? "cancelled by a client" : reason,
      })
      for (;;) {
        const current = yield* get(jobId)
        if (isTerminalState(current.state)) {
          return yield* new JobTerminal({ jobId, state: current.state })
        }
        if (current.state === JobState.PENDING || current.state === JobState.UNSPECIFIED) {
          // Not admitted: nobody else acts on it, cancel it outright. A lost race with the
          // coordinator's admission leaves it RUNNING, and the next round requests instead.
          const { status } = yield* transition(jobId, JobState.CANCELLED, {
            error,
            from: [JobState.PENDING, JobState.UNSPECIFIED],
          })
          if (status.state === JobState.CANCELLED) return status
          continue
        }
        // Admitted: ask the coordinator, which owns running jobs, to stop it.
        return yield* casUpdate<JobTerminal>(
          jobId,
          (s) => {
            if (isTerminalState(s.state)) {
              return Effect.fail(new JobTerminal({ jobId, state: s.state }))
            }
            if (s.error?.code === ErrorCode.CANCELLED) return Effect.succeed(undefined)
            s.error = error
            return Effect.succeed(s)
          },
          true,
        )
      }
    })

  const appendFirstEvent = (status: JobStatus) =>
    Effect.gen(function* () {
      const event = yield* appendEvent(status.jobId, {
        event: {
          case: "stateChanged",
          value: { state: JobState.PENDING, previousState: JobState.UNSPECIFIED },
        },
      })
      if (status.lastEventSeq < event.seq) status.lastEventSeq = event.seq
      return status
    })

  const createJob = (spec: JobSpec, options: { readonly requestId?: string } = {}) =>
    Effect.gen(function* () {
      const requestId = options.requestId ?? ""
      for (let attempt = 1; ; attempt++) {
        const nowMs = yield* Clock.currentTimeMillis
        const jobId = newJobId(requestId, nowMs)
        const now = BigInt(nowMs)
        const status = create(JobStatusSchema, {
          jobId,
          spec,
          state: JobState.PENDING,
          counts: create(JobCountsSchema),
          createdUnixMs: now,
          updatedUnixMs: now,
        })
        if (yield* tryWrite(jobs.create(jobId, encodeStatus(status)))) {
          return { status: yield* appendFirstEvent(status), created: true }
        }
        if (requestId === "") {
          // A random id collided: astronomically rare, try another.
          if (attempt >= 3) return yield* new JobContended({ jobId, attempts: attempt })
          continue
        }
        const existing = yield* get(jobId)
        if (existing.spec === undefined || !equals(JobSpecSchema, existing.spec, spec)) {
          return yield* new JobAlreadyExists({ jobId, requestId })
        }
        // The first submission may have stopped between storing the job and its first event.
        const done = existing.lastEventSeq === 0n ? yield* appendFirstEvent(existing) : existing
        return { status: done, created: false }
      }
    })

  const list = (filter: { readonly state?: JobState }, token = "", pageSize = 0) =>
    Effect.gen(function* () {
      const size = pageSize <= 0 ? DEFAULT_PAGE_SIZE : Math.min(pageSize, MAX_PAGE_SIZE)
      const cursor = token === "" ? undefined : pageToken.decode(token)
      if (token !== "" && cursor === undefined) {
        return yield* InvalidArgument.of(
          "page_token",
          "not a token from a previous ListJobsResponse",
        )
      }
      const keys = (yield* jobs.keys).filter((k) => JOB_ID_PATTERN.test(k))
      const found = yield* Effect.forEach(
        keys,
        (key) =>
          find(key).pipe(
            Effect.catchTag("JobCorrupt", (e) =>
              Effect.as(Effect.logWarning(e.message), Option.none<JobStatus>()),
            ),
          ),
        { concurrency: 16 },
      )
      const state = filter.state ?? JobState.UNSPECIFIED
      const matching = found
        .flatMap((o) => (Option.isSome(o) ? [o.value] : []))
        .filter((s) => state === JobState.UNSPECIFIED || s.state === state)
        .filter(
          (s) =>
            cursor === undefined ||
            s.createdUnixMs < cursor.created ||
            (s.createdUnixMs === cursor.created && s.jobId < cursor.jobId),
        )
        .sort(newestFirst)
      const page = matching.slice(0, size)
      const last = page[page.length - 1]
      return {
        jobs: page,
        nextPageToken: matching.length > size && last !== undefined ? pageToken.encode(last) : "",
      }
    })

  /**
   * Waits (up to STATUS_SETTLE_MS) until the stored status is final. A writer that died between
   * the event and the status leaves it for its replacement; the watch then ends anyway.
   */
  const statusSettled = (jobId: string) =>
    Effect.gen(function* () {
      for (let waited = 0; waited < STATUS_SETTLE_MS; waited += STATUS_SETTLE_POLL_MS) {
        const status = yield* get(jobId).pipe(Effect.option)
        if (Option.isNone(status) || isTerminalState(status.value.state)) return
        yield* Effect.sleep(STATUS_SETTLE_POLL_MS)
      }
    })

  const watch = (
    jobId: string,
    fromSeq = 0n,
  ): Stream.Stream<JobEvent, JobNotFound | JobStoreError> =>
    Stream.unwrap(
      Effect.gen(function* () {
        const from = fromSeq < 1n ? 1n : fromSeq
        const status = yield* get(jobId)
        // A terminal job has all its events stored: end after the last one, even if its terminal
        // event is missing (a writer that stopped between the state and the event).
        const endAt = isTerminalState(status.state) ? status.lastEventSeq : undefined
        if (endAt !== undefined && endAt < from) return Stream.empty
        // The reader starts at the beginning of the stream, so events appended after the status
        // was read are not missed.
        const name = `t1gw_${randomBytes(8).toString("hex")}`
        yield* Effect.acquireRelease(
          openEventReader(bus, stream, name, subjects.jobEvents(jobId)),
          (kind) => closeEventReader(bus, subjects, stream, name, kind),
        )
        let last = from - 1n
        return bus.consume(stream, name, { maxInFlight: 256 }).pipe(
          // Acked on arrival: the consumer is this reader's alone and dies with it.
          Stream.mapEffect((item) =>
            Effect.andThen(item.ack, decodeEvent(`${item.subject}#${item.streamSeq}`, item.data)),
          ),
          Stream.takeUntil((e) => isTerminalEvent(e) || (endAt !== undefined && e.seq >= endAt)),
          // The coordinator publishes events before it stores the status they lead to: hold the
          // terminal event until GetJob shows the final state too, so a client that reads the
          // status when the watch ends sees it.
          Stream.mapEffect((e) =>
            endAt === undefined && isTerminalEvent(e)
              ? Effect.as(statusSettled(jobId), e)
              : Effect.succeed(e),
          ),
          // Earlier than asked, or a redelivery of one already sent.
          Stream.filter((e) => {
            if (e.seq <= last) return false
            last = e.seq
            return true
          }),
        )
      }),
    )

  const changes: Stream.Stream<JobStatus, JobStoreError> = Stream.unwrap(
    Effect.map(jobs.watch(), (entries) =>
      entries.pipe(
        Stream.filter((e) => e.operation === "put" && JOB_ID_PATTERN.test(e.key)),
        Stream.mapEffect((e) => decodeStatus(e.key, e.value)),
      ),
    ),
  )

  /** A stored value as the coordinator reads it: undecodable ones are logged and skipped. */
  const storedOf = (key: string, value: Uint8Array, revision: number) =>
    decodeStatus(key, value).pipe(
      Effect.map((status) =>
        Option.some<StoredJob>({
          jobId: key,
          status: status.jobId === "" ? create(JobStatusSchema, { ...status, jobId: key }) : status,
          revision,
        }),
      ),
      Effect.catchTag("JobCorrupt", (e) => Effect.as(Effect.logWarning(e.message), Option.none())),
    )

  const getStored = (jobId: string) =>
    Effect.flatMap(jobs.get(jobId), (found) =>
      Option.isNone(found)
        ? Effect.succeed(Option.none<StoredJob>())
        : storedOf(jobId, found.value.value, found.value.revision),
    )

  const storedChanges = Effect.map(jobs.watch(), (entries) =>
    entries.pipe(
      Stream.mapEffect(
        (e): Effect.Effect<JobChange | undefined> =>
          e.operation === "delete"
            ? Effect.succeed({ _tag: "Deleted", jobId: e.key })
            : Effect.map(storedOf(e.key, e.value, e.revision), (found) =>
                Option.isSome(found) ? { _tag: "Put", job: found.value } : undefined,
              ),
      ),
      Stream.filter((c): c is JobChange => c !== undefined),
    ),
  )

  return {
    subjects,
    create: createJob,
    get,
    find,
    update,
    list,
    transition,
    cancel,
    appendEvent,
    watch,
    changes,
    getStored,
    storedChanges,
    compareAndSet: (jobId, status, revision) => jobs.update(jobId, encodeStatus(status), revision),
    publishEvent: (event) =>
      bus.jsPublish(subjects.jobEvents(event.jobId), toBinary(JobEventSchema, event), {
        msgId: jobEventMsgId(event.jobId, event.seq),
      }),
  }
}

/** Appends one event to a job's log (opens the buckets each call; hold a jobStore to reuse). */
export const appendJobEvent = (
  bus: BusShape,
  subjects: Subjects,
  jobId: string,
  event: JobEventInit,
): Effect.Effect<JobEvent, JobNotFound | JobStoreError> =>
  Effect.flatMap(makeJobStore(bus, subjects), (store) => store.appendEvent(jobId, event))
