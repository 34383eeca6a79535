import { type Cause, Clock, Effect, Layer, Option, Queue, type Scope, Stream } from "effect"
import {
  Bus,
  type BusMessage,
  type BusShape,
  type Headers,
  type KvBucket,
  type KvEntry,
  type ObjectStore,
  type WorkItem,
} from "./bus.ts"
import {
  BusClosed,
  InvalidSubject,
  JetStreamError,
  KvConflict,
  NoResponders,
  type PayloadTooLarge,
  RequestTimeout,
} from "./errors.ts"
import { type Delivery, MemoryConsumer, MemoryStream, type Puller } from "./memory-jetstream.ts"
import { MemoryKvBucket } from "./memory-kv.ts"
import { MemoryPubSub } from "./memory-pubsub.ts"
import { checkOutgoing } from "./outgoing.ts"
import { subjectProblem } from "./subjects.ts"

export interface MemoryBusOptions {
  /** Same default as nats-server, so that code that passes here passes against NATS. */
  readonly maxPayload?: number
}

const DEFAULT_MAX_PAYLOAD = 1024 * 1024
const DEFAULT_MAX_IN_FLIGHT = 100
const NO_HEADERS: Headers = Object.freeze({})

/** The whole bus inside one process: the embedded default and fast unit tests. */
export const makeMemoryBus = (
  options: MemoryBusOptions = {},
): Effect.Effect<BusShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const maxPayload = options.maxPayload ?? DEFAULT_MAX_PAYLOAD
    const pubsub = new MemoryPubSub()
    const streams = new Map<string, MemoryStream>()
    const buckets = new Map<string, MemoryKvBucket>()
    const objectStores = new Map<string, Map<string, Uint8Array>>()
    let closed = false

    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        pubsub.clear()
        for (const s of streams.values()) s.close()
      }),
    )

    const guard = (
      operation: string,
      subject: string,
      data: Uint8Array,
      headers?: Headers,
    ): Effect.Effect<void, BusClosed | PayloadTooLarge | InvalidSubject> =>
      Effect.suspend(
        (): Effect.Effect<void, BusClosed | PayloadTooLarge | InvalidSubject> =>
          closed
            ? Effect.fail(new BusClosed({ operation }))
            : checkOutgoing(maxPayload, subject, data, headers),
      )

    // Copies, as a network hop would: a sender may reuse its buffer after publishing.
    const message = (
      subject: string,
      data: Uint8Array,
      headers: Headers | undefined,
      reply: string | undefined,
    ): BusMessage => ({ subject, data: data.slice(), headers: headers ?? NO_HEADERS, reply })

    const findConsumer = (stream: string, durable: string) => {
      const s = streams.get(stream)
      const c = s?.consumers.get(durable)
      if (s === undefined || c === undefined) {
        return Effect.fail(
          new JetStreamError({
            operation: "consume",
            reason: `consumer ${stream}/${durable} not found`,
          }),
        )
      }
      return Effect.succeed({ stream: s, consumer: c })
    }

    const workItem = (stream: MemoryStream, consumer: MemoryConsumer, d: Delivery): WorkItem => {
      const seq = d.message.seq
      return {
        subject: d.message.subject,
        data: d.message.data,
        headers: d.message.headers,
        reply: undefined,
        stream: stream.spec.name,
        streamSeq: seq,
        deliveryCount: d.deliveryCount,
        ack: Effect.sync(() => consumer.ack(seq)),
        nak: (delayMs = 0) => Effect.sync(() => consumer.nak(seq, delayMs)),
        working: Effect.sync(() => consumer.working(seq)),
        term: () => Effect.sync(() => consumer.term(seq)),
      }
    }

    const kvBucket = (bucket: MemoryKvBucket): KvBucket => ({
      name: bucket.name,
      get: (key) => Effect.sync(() => Option.fromUndefinedOr(bucket.get(key))),
      put: (key, value) => Effect.sync(() => bucket.write(key, value, "put")),
      create: (key, value) =>
        Effect.suspend(() =>
          bucket.revisionOf(key) !== 0
            ? Effect.fail(new KvConflict({ bucket: bucket.name, key, expectedRevision: 0 }))
            : Effect.sync(() => bucket.write(key, value, "put")),
        ),
      update: (key, value, revision) =>
        Effect.suspend(() =>
          bucket.revisionOf(key) !== revision
            ? Effect.fail(new KvConflict({ bucket: bucket.name, key, expectedRevision: revision }))
            : Effect.sync(() => bucket.write(key, value, "put")),
        ),
      delete: (key) => Effect.sync(() => void bucket.write(key, new Uint8Array(0), "delete")),
      keys: Effect.sync(() => bucket.keys()),
      watch: (key = ">") =>
        Effect.gen(function* () {
          const queue = yield* Queue.unbounded<KvEntry, Cause.Done>()
          yield* Effect.acquireRelease(
            Effect.sync(() => bucket.watch(key, (e) => Queue.offerUnsafe(queue, e))),
            (unwatch) => Effect.sync(unwatch),
          )
          return Stream.fromQueue(queue)
        }),
    })

    const bus: BusShape = {
      maxPayload,
      publish: (subject, data, headers) =>
        Effect.andThen(
          guard("publish", subject, data, headers),
          Effect.sync(() => void pubsub.publish(message(subject, data, headers, undefined))),
        ),
      subscribe: (subject, options) =>
        Effect.gen(function* () {
          if (closed) return yield* new BusClosed({ operation: "subscribe" })
          const problem = subjectProblem(subject, true)
          if (problem !== undefined) return yield* new InvalidSubject({ subject, reason: problem })
          const queue = yield* Queue.unbounded<BusMessage, Cause.Done>()
          yield* Effect.acquireRelease(
            Effect.sync(() =>
              pubsub.subscribe(subject, options?.queue, (m) => Queue.offerUnsafe(queue, m)),
            ),
            (unsubscribe) => Effect.sync(unsubscribe),
          )
          return Stream.fromQueue(queue)
        }),
      request: (subject, data, { timeoutMs, headers }) =>
        Effect.andThen(
          guard("request", subject, data, headers),
          Effect.callback<BusMessage, NoResponders | RequestTimeout>((resume) => {
            const inbox = pubsub.newInbox()
            let timer: NodeJS.Timeout | undefined
            const unsubscribe = pubsub.subscribe(inbox, undefined, (reply) => {
              unsubscribe()
              clearTimeout(timer)
              resume(Effect.succeed(reply))
            })
            if (pubsub.publish(message(subject, data, headers, inbox)) === 0) {
              unsubscribe()
              resume(Effect.fail(new NoResponders({ subject })))
              return
            }
            timer = setTimeout(() => {
              unsubscribe()
              resume(Effect.fail(new RequestTimeout({ subject, timeoutMs })))
            }, timeoutMs)
            return Effect.sync(() => {
              unsubscribe()
              clearTimeout(timer)
            })
          }),
        ),
      respond: (request, data, headers) => {
        const reply = request.reply
        if (reply === undefined) return Effect.void
        return Effect.andThen(
          guard("respond", reply, data, headers),
          Effect.sync(() => void pubsub.publish(message(reply, data, headers, undefined))),
        )
      },
      ensureStream: (spec) =>
        Effect.sync(() => {
          const existing = streams.get(spec.name)
          if (existing === undefined) streams.set(spec.name, new MemoryStream(spec))
          else existing.spec = spec
        }),
      jsPublish: (subject, data, options) =>
        Effect.andThen(guard("jsPublish", subject, data, options?.headers), () => {
          const stream = [...streams.values()].find((s) => s.accepts(subject))
          if (stream === undefined) {
            return Effect.fail(
              new JetStreamError({
                operation: "jsPublish",
                reason: `no stream is bound to subject ${subject}`,
              }),
            )
          }
          const m = message(subject, data, options?.headers, undefined)
          return Effect.map(Clock.currentTimeMillis, (now) =>
            stream.append(subject, m.data, m.headers, now, options?.msgId),
          )
        }),
      ensureConsumer: (spec) =>
        Effect.suspend(() => {
          const stream = streams.get(spec.stream)
          if (stream === undefined) {
            return Effect.fail(
              new JetStreamError({
                operation: "ensureConsumer",
                reason: `stream ${spec.stream} not found`,
              }),
            )
          }
          const existing = stream.consumers.get(spec.durable)
          if (existing === undefined) {
            stream.consumers.set(spec.durable, new MemoryConsumer(spec, stream))
          } else existing.spec = spec
          return Effect.void
        }),
      consume: (streamName, durable, options) =>
        Stream.unwrap(
          Effect.gen(function* () {
            const { stream, consumer } = yield* findConsumer(streamName, durable)
            const queue = yield* Queue.unbounded<WorkItem, Cause.Done>()
            const puller: Puller = {
              capacity: options?.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT,
              inFlight: new Set(),
              push: (d) => Queue.offerUnsafe(queue, workItem(stream, consumer, d)),
            }
            yield* Effect.acquireRelease(
              Effect.sync(() => consumer.attach(puller)),
              (detach) => Effect.sync(detach),
            )
            return Stream.fromQueue(queue)
          }),
        ),
      kv: (name) =>
        Effect.sync(() => {
          let bucket = buckets.get(name)
          if (bucket === undefined) {
            bucket = new MemoryKvBucket(name)
            buckets.set(name, bucket)
          }
          return kvBucket(bucket)
        }),
      objectStore: (name) =>
        Effect.sync((): ObjectStore => {
          let store = objectStores.get(name)
          if (store === undefined) {
            store = new Map()
            objectStores.set(name, store)
          }
          const objects = store
          return {
            name,
            put: (key, data) =>
              Effect.sync(() => {
                objects.set(key, data.slice())
                return { name: key, size: data.byteLength }
              }),
            get: (key) => Effect.sync(() => Option.fromUndefinedOr(objects.get(key))),
            delete: (key) => Effect.sync(() => void objects.delete(key)),
          }
        }),
    }
    return bus
  })

export const MemoryBusLive = (options: MemoryBusOptions = {}): Layer.Layer<Bus> =>
  Layer.effect(Bus, makeMemoryBus(options))
