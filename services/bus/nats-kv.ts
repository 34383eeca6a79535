import type { KV } from "@nats-io/kv"
import type { ObjectStore as NatsObjectStore } from "@nats-io/obj"
import { Effect, Option, Schedule, Stream } from "effect"
import type { KvBucket, KvEntry, ObjectStore } from "./bus.ts"
import { JetStreamError, KvConflict, reasonOf } from "./errors.ts"

const failure = (operation: string) => (cause: unknown) =>
  new JetStreamError({ operation, reason: reasonOf(cause) })

// JetStream's "wrong last sequence" (10071): a create or CAS update lost the race.
const isRevisionConflict = (cause: unknown): boolean =>
  /wrong last sequence|key exists|10071/i.test(reasonOf(cause))

const entry = (e: {
  key: string
  value: Uint8Array
  revision: number
  operation: string
}): KvEntry => ({
  key: e.key,
  value: e.value,
  revision: e.revision,
  operation: e.operation === "PUT" ? "put" : "delete",
})

// A replicated bucket whose stream leader died answers no one until its raft group has elected
// another (seconds on a cluster); nats.js reports that 503 as "jetstream is not enabled". Nothing
// was stored, so the same request is sent again, for about as long as jsPublish waits.
const NO_LEADER = /jetstream is not enabled|no responders/i
const untilLeader = <A, E>(effect: Effect.Effect<A, E | JetStreamError>) =>
  Effect.retry(effect, {
    while: (e) => e instanceof JetStreamError && NO_LEADER.test(e.reason),
    schedule: Schedule.min([Schedule.exponential("100 millis"), Schedule.spaced("1 second")]).pipe(
      Schedule.jittered,
      Schedule.upTo({ duration: "30 seconds" }),
    ),
  })

export const natsKvBucket = (name: string, kv: KV): KvBucket => {
  const cas = (key: string, revision: number, f: () => Promise<number>) =>
    untilLeader(
      Effect.tryPromise({
        try: f,
        catch: (cause) =>
          isRevisionConflict(cause)
            ? new KvConflict({ bucket: name, key, expectedRevision: revision })
            : failure(`kv ${name} write ${key}`)(cause),
      }),
    )
  return {
    name,
    get: (key) =>
      untilLeader(
        Effect.tryPromise({ try: () => kv.get(key), catch: failure(`kv ${name} get ${key}`) }),
      ).pipe(
        Effect.map((e) =>
          e === null || e.operation !== "PUT" ? Option.none() : Option.some(entry(e)),
        ),
      ),
    put: (key, value) =>
      untilLeader(
        Effect.tryPromise({
          try: () => kv.put(key, value),
          catch: failure(`kv ${name} put ${key}`),
        }),
      ),
    create: (key, value) => cas(key, 0, () => kv.create(key, value)),
    update: (key, value, revision) => cas(key, revision, () => kv.update(key, value, revision)),
    delete: (key) =>
      untilLeader(
        Effect.tryPromise({
          try: () => kv.delete(key),
          catch: failure(`kv ${name} delete ${key}`),
        }),
      ),
    keys: Effect.tryPromise({
      try: async () => {
        const out: string[] = []
        for await (const k of await kv.keys()) out.push(k)
        return out
      },
      catch: failure(`kv ${name} keys`),
    }),
    watch: (key = ">") =>
      Effect.acquireRelease(
        Effect.tryPromise({
          try: async () => {
            // Delete markers already in the bucket are history, not news (the memory bus skips
            // them too); nats.js's isUpdate flag marks the last initial entry as an update.
            const seen = (await kv.status()).streamInfo.state.last_seq
            return { seen, it: await kv.watch({ key }) }
          },
          catch: failure(`kv ${name} watch`),
        }),
        ({ it }) => Effect.sync(() => it.stop()),
      ).pipe(
        Effect.map(({ seen, it }) =>
          Stream.fromAsyncIterable(it, failure(`kv ${name} watch`)).pipe(
            Stream.filter((e) => e.operation === "PUT" || e.revision > seen),
            Stream.map(entry),
          ),
        ),
      ),
  }
}

export const natsObjectStore = (name: string, store: NatsObjectStore): ObjectStore => ({
  name,
  put: (key, data) =>
    Effect.tryPromise({
      try: () => store.putBlob({ name: key }, data),
      catch: failure(`object ${name} put ${key}`),
    }).pipe(Effect.map((info) => ({ name: key, size: info.size }))),
  get: (key) =>
    Effect.tryPromise({
      try: () => store.getBlob(key),
      catch: failure(`object ${name} get ${key}`),
    }).pipe(Effect.map(Option.fromNullishOr)),
  delete: (key) =>
    Effect.tryPromise({
      try: () => store.delete(key).then(() => undefined),
      catch: failure(`object ${name} delete ${key}`),
    }),
})
