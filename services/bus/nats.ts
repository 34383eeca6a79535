import {
  AckPolicy,
  DeliverPolicy,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import {
  ClosedConnectionError,
  DrainingConnectionError,
  InvalidSubjectError,
  type Msg,
  type MsgHdrs,
  NoRespondersError,
  nanos,
  headers as natsHeaders,
  TimeoutError,
} from "@nats-io/nats-core"
import { Objm } from "@nats-io/obj"
import { Cause, Effect, Layer, Queue, Schedule, type Scope, Stream } from "effect"
import { Bus, type BusMessage, type BusShape, type Headers, type WorkItem } from "./bus.ts"
import {
  BusClosed,
  type BusError,
  InvalidSubject,
  JetStreamError,
  NoResponders,
  RequestTimeout,
  reasonOf,
} from "./errors.ts"
import { type AckQueue, ackQueue } from "./nats-acks.ts"
import { connectNats, type NatsConnectOptions } from "./nats-connect.ts"
import { natsKvBucket, natsObjectStore } from "./nats-kv.ts"
import {
  checkReplicas,
  raiseBucketReplicas,
  replicaCountProblem,
  replicaRefusal,
  replicasFor,
  reportReplicaChange,
} from "./nats-replicas.ts"
import {
  ConnectionDropped,
  isNoResponders,
  isTimeout,
  NotConnected,
  watchConnection,
} from "./nats-watch.ts"
import { checkOutgoing } from "./outgoing.ts"

const DEFAULT_MAX_IN_FLIGHT = 100

const toHeaders = (h: MsgHdrs | undefined): Headers => {
  if (h === undefined) return {}
  const out: Record<string, string> = {}
  for (const k of h.keys()) out[k] = h.get(k)
  return out
}

const fromHeaders = (h: Headers | undefined): MsgHdrs | undefined => {
  if (h === undefined || Object.keys(h).length === 0) return undefined
  const out = natsHeaders()
  for (const [k, v] of Object.entries(h)) out.set(k, v)
  return out
}

const toMessage = (m: Msg): BusMessage => ({
  subject: m.subject,
  data: m.data,
  headers: toHeaders(m.headers),
  reply: m.reply === "" ? undefined : m.reply,
})

/** Maps a nats.js failure to the bus's typed errors. */
export const natsFailure =
  (operation: string, subject = "") =>
  (cause: unknown): BusError => {
    if (cause instanceof ClosedConnectionError || cause instanceof DrainingConnectionError) {
      return new BusClosed({ operation })
    }
    if (cause instanceof InvalidSubjectError) {
      return new InvalidSubject({ subject, reason: reasonOf(cause) })
    }
    if (cause instanceof NoRespondersError) return new NoResponders({ subject })
    return new JetStreamError({ operation, reason: reasonOf(cause) })
  }

/**
 * A delivered message as a work item. Headers and delivery info are parsed when first read (a
 * trajectory chunk's consumer reads neither; parsing both for every message showed in
 * bench:stream's profile), and acks go through the connection's AckQueue (nats-acks.ts).
 */
class NatsWorkItem implements WorkItem {
  readonly subject: string
  readonly data: Uint8Array
  readonly reply = undefined
  readonly ack: Effect.Effect<void>
  readonly working: Effect.Effect<void>
  private parsedHeaders: Headers | undefined

  constructor(
    private readonly m: JsMsg,
    private readonly acks: AckQueue,
  ) {
    this.subject = m.subject
    this.data = m.data
    this.ack = Effect.sync(() => acks.later(() => m.ack()))
    this.working = Effect.sync(() => acks.later(() => m.working()))
  }
  get headers(): Headers {
    this.parsedHeaders ??= toHeaders(this.m.headers)
    return this.parsedHeaders
  }
  get stream(): string {
    return this.m.info.stream
  }
  get streamSeq(): number {
    return this.m.seq
  }
  get deliveryCount(): number {
    return this.m.info.deliveryCount
  }
  nak(delayMs?: number): Effect.Effect<void> {
    return Effect.sync(() => this.acks.later(() => this.m.nak(delayMs)))
  }
  // A reason rides on +TERM only from nats-server 2.10; older servers ignore the whole term.
  term(): Effect.Effect<void> {
    return Effect.sync(() => this.acks.later(() => this.m.term()))
  }
}

/** The consumer's messages as work items, mapped as they are taken (no stream stage of its own). */
const workItems = (messages: AsyncIterable<JsMsg>, acks: AckQueue): AsyncIterable<WorkItem> => ({
  [Symbol.asyncIterator]: () => {
    const it = messages[Symbol.asyncIterator]()
    return {
      next: () =>
        it
          .next()
          .then(
            (r): IteratorResult<WorkItem> =>
              r.done === true
                ? { done: true, value: undefined }
                : { done: false, value: new NatsWorkItem(r.value, acks) },
          ),
      return: (value?: unknown) =>
        it.return === undefined
          ? Promise.resolve({ done: true as const, value: undefined })
          : it.return(value).then(() => ({ done: true as const, value: undefined })),
    }
  },
})

/** How long one jsPublish attempt waits for a dropped connection to come back. */
const PUBLISH_RECONNECT_WAIT_MS = 5_000
/**
 * Retries of a no-responders reply (no stream leader yet, JetStream still starting) before giving
 * up: it also means "no stream is bound to the subject", which no retry fixes.
 */
const PUBLISH_NO_RESPONDER_RETRIES = 3
/** The wait before a publish's first retry; later ones follow `publishRetry`. */
const PUBLISH_FIRST_RETRY = "100 millis"
/** What JetStream's API answers, or fails to, while a cluster elects a leader. */
const API_UNANSWERED = /timeout|jetstream is not enabled|no responders|temporarily unavailable/i

/** jsPublish retries transient failures for about this long, then fails with the last one. */
const publishRetry = Schedule.min([
  Schedule.exponential("100 millis"),
  Schedule.spaced("1 second"),
]).pipe(Schedule.jittered, Schedule.upTo({ duration: "30 seconds" }))

/** The production bus: core NATS, JetStream work queues, KV and object store. */
export const makeNatsBus = (
  options: NatsConnectOptions,
): Effect.Effect<BusShape, BusError, Scope.Scope> =>
  Effect.gen(function* () {
    const replicas = options.replicas ?? 1
    const badCount = replicaCountProblem(replicas)
    // The CLI refuses a bad count with its usage; from code it is a programming error.
    if (badCount !== undefined) return yield* Effect.die(new RangeError(`replicas: ${badCount}`))
    const nc = yield* connectNats(options)
    yield* checkReplicas(nc, replicas)
    const acks = ackQueue()
    // Registered after the connection, so it runs before the connection drains.
    yield* Effect.addFinalizer(() => Effect.sync(acks.flush))
    const maxPayload = nc.info?.max_payload ?? 1024 * 1024
    const js = jetstream(nc)
    const connection = watchConnection(nc)
    // On a cluster (replicas > 1) no responders on a publish is also a stream whose leader died
    // and whose raft group is electing another, for seconds: retried for the whole publish window.
    const noResponderRetries =
      replicas > 1 ? Number.POSITIVE_INFINITY : PUBLISH_NO_RESPONDER_RETRIES
    let manager: Promise<JetStreamManager> | undefined
    // After a node dies, JetStream's API goes unanswered on a cluster (a timeout, or a 503 that
    // nats.js reports as "jetstream is not enabled") until the meta group or the stream has
    // elected a leader: seconds. Opening a stream, bucket or object store is idempotent (asked
    // first, added only when absent), so on a cluster it is asked again for up to 30 s instead
    // of failing the caller (seen: t1 serve's coordinator stopped, and the process with it, on
    // "ensureStream …_EPISODES failed: timeout" while the job store's leader node was killed).
    const untilApiAnswers = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      replicas === 1
        ? effect
        : Effect.retry(effect, {
            while: (e) => e instanceof JetStreamError && API_UNANSWERED.test(e.reason),
            schedule: publishRetry,
          })

    const jsm = (operation: string) =>
      Effect.tryPromise({
        try: () => {
          manager ??= jetstreamManager(nc)
          return manager
        },
        catch: (cause) => {
          manager = undefined
          return natsFailure(operation)(cause)
        },
      })

    // nats.js opens an existing bucket as it is; its stream is raised to the replica count once
    // per bus (buckets are opened per operation in places, and the count does not change).
    const raised = new Set<string>()
    const raiseOnce = (stream: string) =>
      replicas === 1 || raised.has(stream)
        ? Effect.void
        : Effect.andThen(jsm(`replicas ${stream}`), (m) =>
            raiseBucketReplicas(m, stream, replicas).pipe(
              Effect.tap(() => Effect.sync(() => raised.add(stream))),
            ),
          )

    const checkSize = (subject: string, data: Uint8Array, headers?: Headers) =>
      checkOutgoing(maxPayload, subject, data, headers)

    const attempt = <A>(operation: string, subject: string, f: () => A) =>
      Effect.try({ try: f, catch: natsFailure(operation, subject) })

    const bus: BusShape = {
      maxPayload,
      publish: (subject, data, headers) =>
        Effect.andThen(
          checkSize(subject, data, headers),
          attempt("publish", subject, () => {
            const h = fromHeaders(headers)
            nc.publish(subject, data, h === undefined ? undefined : { headers: h })
          }),
        ),
      subscribe: (subject, options) =>
        Effect.gen(function* () {
          // A callback subscription feeding a queue: the stream then takes whatever has arrived
          // as one array, instead of one async-iterator step per message.
          const queue = yield* Queue.unbounded<BusMessage, BusError | Cause.Done>()
          yield* Effect.acquireRelease(
            attempt("subscribe", subject, () =>
              nc.subscribe(subject, {
                ...(options?.queue === undefined ? {} : { queue: options.queue }),
                callback: (err, m) => {
                  if (err === null) Queue.offerUnsafe(queue, toMessage(m))
                  else
                    Queue.failCauseUnsafe(queue, Cause.fail(natsFailure("subscribe", subject)(err)))
                },
              }),
            ),
            (s) => Effect.sync(() => s.unsubscribe()),
          )
          // The SUB must reach the server before callers publish and expect delivery.
          yield* Effect.tryPromise({ try: () => nc.flush(), catch: natsFailure("subscribe") })
          return Stream.fromQueue(queue)
        }),
      request: (subject, data, { timeoutMs, headers }) =>
        Effect.andThen(
          checkSize(subject, data, headers),
          Effect.tryPromise({
            try: () => {
              const h = fromHeaders(headers)
              return nc.request(subject, data, {
                timeout: timeoutMs,
                ...(h === undefined ? {} : { headers: h }),
              })
            },
            catch: (cause): BusError => {
              const failure = natsFailure("request", subject)(cause)
              if (failure._tag !== "JetStreamError") return failure
              const inner = cause instanceof Error ? cause.cause : undefined
              if (cause instanceof TimeoutError || inner instanceof TimeoutError) {
                return new RequestTimeout({ subject, timeoutMs })
              }
              if (inner instanceof NoRespondersError) return new NoResponders({ subject })
              return failure
            },
          }),
        ).pipe(Effect.map(toMessage)),
      respond: (request, data, headers) => {
        const reply = request.reply
        if (reply === undefined) return Effect.void
        return bus.publish(reply, data, headers)
      },
      ensureStream: (spec) =>
        Effect.gen(function* () {
          const m = yield* jsm("ensureStream")
          const config = {
            subjects: [...spec.subjects],
            retention:
              spec.retention === "workqueue" ? RetentionPolicy.Workqueue : RetentionPolicy.Limits,
            storage: spec.storage === "memory" ? StorageType.Memory : StorageType.File,
            max_age: nanos(spec.maxAgeMs ?? 0),
            duplicate_window: nanos(spec.duplicateWindowMs ?? 120_000),
          }
          const change = yield* Effect.tryPromise({
            try: async () => {
              // Absent only when the server says so: a timeout during an election is not.
              const existing = await m.streams.info(spec.name).then(
                (info) => info.config.num_replicas,
                (e: unknown) => {
                  if (e instanceof Error && /stream not found/i.test(e.message)) return undefined
                  throw e
                },
              )
              if (existing !== undefined) {
                const { retention: _r, storage: _s, ...mutable } = config
                const to = replicasFor(existing, replicas)
                await m.streams.update(spec.name, { ...mutable, num_replicas: to })
                return { from: existing, to }
              }
              await m.streams.add({ name: spec.name, ...config, num_replicas: replicas })
              return { from: replicas, to: replicas }
            },
            catch: (cause) =>
              replicaRefusal(nc, replicas, spec.name, cause) ??
              natsFailure(`ensureStream ${spec.name}`)(cause),
          })
          yield* reportReplicaChange(m, spec.name, change.from, change.to)
        }).pipe(untilApiAnswers),
      jsPublish: (subject, data, options) =>
        Effect.suspend(() => {
          const msgId = options?.msgId
          let noResponders = 0
          // A retry is safe when nothing can have been stored (not connected, no responders) or
          // when the server drops a repeat (a Nats-Msg-Id); otherwise the caller decides.
          const retryable = (cause: unknown): boolean => {
            if (cause instanceof NotConnected) return true
            if (isNoResponders(cause)) return ++noResponders <= noResponderRetries
            return msgId !== undefined && (cause instanceof ConnectionDropped || isTimeout(cause))
          }
          const once = Effect.tryPromise({
            try: async () => {
              await connection.whenConnected(PUBLISH_RECONNECT_WAIT_MS)
              const h = fromHeaders(options?.headers)
              return connection.untilDropped(
                js.publish(subject, data, {
                  ...(msgId === undefined ? {} : { msgID: msgId }),
                  ...(h === undefined ? {} : { headers: h }),
                }),
              )
            },
            catch: (cause) => ({ cause, retry: retryable(cause) }),
          })
          // The retry schedule is built only once a first attempt failed: a trajectory chunk is
          // published per megabyte, and the common path should cost one promise.
          const withRetries = once.pipe(
            Effect.catch((first) =>
              first.retry
                ? Effect.andThen(
                    Effect.sleep(PUBLISH_FIRST_RETRY),
                    once.pipe(
                      Effect.retry({ while: (failure) => failure.retry, schedule: publishRetry }),
                    ),
                  )
                : Effect.fail(first),
            ),
            Effect.mapError((failure) => natsFailure("jsPublish", subject)(failure.cause)),
          )
          return Effect.andThen(checkSize(subject, data, options?.headers), withRetries)
        }).pipe(
          Effect.map((ack) => ({ stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate })),
        ),
      ensureConsumer: (spec) =>
        Effect.gen(function* () {
          const m = yield* jsm("ensureConsumer")
          const config = {
            ack_policy: AckPolicy.Explicit,
            ack_wait: nanos(spec.ackWaitMs),
            max_deliver: spec.maxDeliver,
            ...(spec.maxAckPending === undefined ? {} : { max_ack_pending: spec.maxAckPending }),
          }
          yield* Effect.tryPromise({
            try: async () => {
              const exists = await m.consumers.info(spec.stream, spec.durable).then(
                () => true,
                () => false,
              )
              if (exists) await m.consumers.update(spec.stream, spec.durable, config)
              else {
                await m.consumers.add(spec.stream, {
                  ...config,
                  durable_name: spec.durable,
                  deliver_policy: DeliverPolicy.All,
                  ...(spec.filterSubject === undefined
                    ? {}
                    : { filter_subject: spec.filterSubject }),
                })
              }
            },
            catch: natsFailure(`ensureConsumer ${spec.stream}/${spec.durable}`),
          })
        }),
      consume: (stream, durable, options) =>
        Stream.unwrap(
          Effect.gen(function* () {
            const messages = yield* Effect.acquireRelease(
              Effect.tryPromise({
                try: async () => {
                  const consumer = await js.consumers.get(stream, durable)
                  return consumer.consume({
                    max_messages: options?.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT,
                  })
                },
                catch: natsFailure(`consume ${stream}/${durable}`),
              }),
              (m) => Effect.promise(() => m.close().then(() => undefined)),
            )
            return Stream.fromAsyncIterable(workItems(messages, acks), natsFailure("consume"))
          }),
        ),
      kv: (bucket, options) =>
        Effect.tryPromise({
          try: () =>
            new Kvm(nc).create(bucket, {
              history: options?.history ?? 1,
              replicas,
              // A direct get is answered by the replica nearest the reader, a follower that has
              // not applied the latest write among them: the gateway's GetJob right after
              // SubmitJob answered NOT_FOUND on a loaded three-node cluster. Replicated buckets
              // are read through their stream's leader (a bucket made with direct gets keeps
              // them on the server, this client does not use them).
              ...(replicas > 1 ? { allow_direct: false } : {}),
            }),
          catch: (cause) =>
            replicaRefusal(nc, replicas, `KV_${bucket}`, cause) ??
            natsFailure(`kv ${bucket}`)(cause),
        }).pipe(
          untilApiAnswers,
          Effect.tap(() => raiseOnce(`KV_${bucket}`)),
          Effect.map((kv) => natsKvBucket(bucket, kv)),
        ),
      objectStore: (bucket) =>
        Effect.tryPromise({
          try: () => new Objm(nc).create(bucket, { replicas }),
          catch: (cause) =>
            replicaRefusal(nc, replicas, `OBJ_${bucket}`, cause) ??
            natsFailure(`objectStore ${bucket}`)(cause),
        }).pipe(
          untilApiAnswers,
          Effect.tap(() => raiseOnce(`OBJ_${bucket}`)),
          Effect.map((store) => natsObjectStore(bucket, store)),
        ),
    }
    return bus
  })

export const NatsBusLive = (options: NatsConnectOptions): Layer.Layer<Bus, BusError> =>
  Layer.effect(Bus, makeNatsBus(options))
