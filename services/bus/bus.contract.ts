import { randomUUID } from "node:crypto"
import { Cause, Effect, Exit, type Layer, Option, Queue, type Scope, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { Bus, type BusShape } from "./bus.ts"
import type { BusError } from "./errors.ts"

const bytes = (s: string) => new TextEncoder().encode(s)
const text = (b: Uint8Array) => new TextDecoder().decode(b)

/** Runs a stream in the background into a queue the test can take from. */
const drainInto = <A, E>(stream: Stream.Stream<A, E>) =>
  Effect.gen(function* () {
    const q = yield* Queue.unbounded<A>()
    yield* Effect.forkScoped(Stream.runForEach(stream, (a) => Queue.offer(q, a)))
    return q
  })

const takeWithin = <A>(q: Queue.Queue<A>, ms: number) =>
  Effect.timeoutOption(Queue.take(q), `${ms} millis`)

const failureTag = <A, E extends { _tag: string }>(exit: Exit.Exit<A, E>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const e = Cause.findErrorOption(exit.cause)
  return Option.isSome(e) ? e.value._tag : "defect"
}

/**
 * The behaviour every Bus adapter must have. Each test uses fresh subjects and streams so the
 * suite can share one server.
 */
export const busContract = (
  name: string,
  layer: () => Layer.Layer<Bus, BusError>,
  timing: { readonly ackWaitMs: number } = { ackWaitMs: 600 },
) => {
  const run = <A, E>(f: (bus: BusShape, id: string) => Effect.Effect<A, E, Scope.Scope>) =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          return yield* f(bus, randomUUID().replaceAll("-", "").slice(0, 12))
        }),
      ).pipe(Effect.provide(layer())),
    )
  const { ackWaitMs } = timing

  const workQueue = (bus: BusShape, id: string, maxDeliver = 5) =>
    Effect.gen(function* () {
      const stream = `WQ_${id}`
      yield* bus.ensureStream({
        name: stream,
        subjects: [`wq.${id}.>`],
        retention: "workqueue",
        storage: "memory",
      })
      yield* bus.ensureConsumer({ stream, durable: "workers", ackWaitMs, maxDeliver })
      return stream
    })

  describe(`Bus contract: ${name}`, () => {
    it("delivers published messages in order with their headers", async () => {
      const got = await run((bus, id) =>
        Effect.gen(function* () {
          const sub = yield* bus.subscribe(`t.${id}.a`)
          for (let i = 0; i < 5; i++)
            yield* bus.publish(`t.${id}.a`, bytes(`m${i}`), { k: `v${i}` })
          return yield* Stream.runCollect(Stream.take(sub, 5))
        }),
      )
      expect(got.map((m) => text(m.data))).toEqual(["m0", "m1", "m2", "m3", "m4"])
      expect(got[3]?.headers.k).toBe("v3")
    })

    it("matches * and > wildcards", async () => {
      const got = await run((bus, id) =>
        Effect.gen(function* () {
          const one = yield* bus.subscribe(`t.${id}.*.exec`)
          const all = yield* bus.subscribe(`t.${id}.>`)
          yield* bus.publish(`t.${id}.s1.exec`, bytes("1"))
          yield* bus.publish(`t.${id}.s1.put`, bytes("2"))
          const a = yield* Stream.runCollect(Stream.take(one, 1))
          const b = yield* Stream.runCollect(Stream.take(all, 2))
          return [a.map((m) => m.subject), b.map((m) => m.subject)]
        }),
      )
      expect(got[0]).toHaveLength(1)
      expect(got[1]).toHaveLength(2)
    })

    it("gives each message to exactly one member of a queue group", async () => {
      const counts = await run((bus, id) =>
        Effect.gen(function* () {
          const a = yield* drainInto(yield* bus.subscribe(`t.${id}.q`, { queue: "g" }))
          const b = yield* drainInto(yield* bus.subscribe(`t.${id}.q`, { queue: "g" }))
          for (let i = 0; i < 40; i++) yield* bus.publish(`t.${id}.q`, bytes(String(i)))
          const seen: string[] = []
          let fromA = 0
          for (;;) {
            const next = yield* Effect.race(
              Effect.map(takeWithin(a, 300), (m) => Option.map(m, (x) => ({ x, from: "a" }))),
              Effect.map(takeWithin(b, 300), (m) => Option.map(m, (x) => ({ x, from: "b" }))),
            )
            if (Option.isNone(next)) break
            seen.push(text(next.value.x.data))
            if (next.value.from === "a") fromA++
          }
          return { total: seen.length, unique: new Set(seen).size, fromA }
        }),
      )
      expect(counts.total).toBe(40)
      expect(counts.unique).toBe(40)
      expect(counts.fromA).toBeGreaterThan(0)
      expect(counts.fromA).toBeLessThan(40)
    })

    it("answers a request with the responder's reply", async () => {
      const reply = await run((bus, id) =>
        Effect.gen(function* () {
          const sub = yield* bus.subscribe(`t.${id}.echo`, { queue: "echo" })
          yield* Effect.forkScoped(
            Stream.runForEach(sub, (m) => bus.respond(m, bytes(`echo:${text(m.data)}`))),
          )
          return yield* bus.request(`t.${id}.echo`, bytes("hi"), { timeoutMs: 2000 })
        }),
      )
      expect(text(reply.data)).toBe("echo:hi")
    })

    it("fails a request with NoResponders when nobody listens, RequestTimeout when nobody answers", async () => {
      const tags = await run((bus, id) =>
        Effect.gen(function* () {
          const none = yield* Effect.exit(
            bus.request(`t.${id}.none`, bytes("x"), { timeoutMs: 1000 }),
          )
          yield* bus.subscribe(`t.${id}.mute`)
          const mute = yield* Effect.exit(
            bus.request(`t.${id}.mute`, bytes("x"), { timeoutMs: 200 }),
          )
          return [failureTag(none), failureTag(mute)]
        }),
      )
      expect(tags).toEqual(["NoResponders", "RequestTimeout"])
    })

    it("rejects a payload over max_payload before sending, with a typed error", async () => {
      const tags = await run((bus, id) =>
        Effect.gen(function* () {
          const sub = yield* drainInto(yield* bus.subscribe(`t.${id}.big`))
          const big = new Uint8Array(bus.maxPayload + 1)
          const p = yield* Effect.exit(bus.publish(`t.${id}.big`, big))
          const r = yield* Effect.exit(bus.request(`t.${id}.big`, big, { timeoutMs: 100 }))
          const h = yield* Effect.exit(
            bus.publish(`t.${id}.big`, new Uint8Array(bus.maxPayload - 4), { "X-Pad": "123456" }),
          )
          const delivered = yield* takeWithin(sub, 200)
          return [failureTag(p), failureTag(r), failureTag(h), Option.isNone(delivered)]
        }),
      )
      expect(tags).toEqual(["PayloadTooLarge", "PayloadTooLarge", "PayloadTooLarge", true])
    })

    it("rejects invalid subjects", async () => {
      const tags = await run((bus) =>
        Effect.gen(function* () {
          const a = yield* Effect.exit(bus.publish("bad subject", bytes("x")))
          const b = yield* Effect.exit(bus.publish("t..x", bytes("x")))
          return [failureTag(a), failureTag(b)]
        }),
      )
      expect(tags).toEqual(["InvalidSubject", "InvalidSubject"])
    })

    it("work queue: each item is delivered once and leaves the queue when acked", async () => {
      const got = await run((bus, id) =>
        Effect.gen(function* () {
          const stream = yield* workQueue(bus, id)
          for (let i = 0; i < 6; i++) yield* bus.jsPublish(`wq.${id}.item`, bytes(String(i)))
          const q = yield* drainInto(bus.consume(stream, "workers", { maxInFlight: 3 }))
          const seen: string[] = []
          for (let i = 0; i < 6; i++) {
            const item = yield* Queue.take(q)
            seen.push(text(item.data))
            expect(item.deliveryCount).toBe(1)
            yield* item.ack
          }
          const extra = yield* takeWithin(q, ackWaitMs * 2)
          return { seen, extra: Option.isSome(extra) }
        }),
      )
      expect(got.seen).toEqual(["0", "1", "2", "3", "4", "5"])
      expect(got.extra).toBe(false)
    })

    it("deduplicates a retried publish by Nats-Msg-Id", async () => {
      const got = await run((bus, id) =>
        Effect.gen(function* () {
          const stream = yield* workQueue(bus, id)
          const first = yield* bus.jsPublish(`wq.${id}.x`, bytes("a"), { msgId: "ep1:0:0" })
          const again = yield* bus.jsPublish(`wq.${id}.x`, bytes("a"), { msgId: "ep1:0:0" })
          yield* bus.jsPublish(`wq.${id}.x`, bytes("b"), { msgId: "ep1:0:1" })
          const q = yield* drainInto(bus.consume(stream, "workers"))
          const a = yield* Queue.take(q)
          yield* a.ack
          const b = yield* Queue.take(q)
          yield* b.ack
          const c = yield* takeWithin(q, 300)
          return { first, again, data: [text(a.data), text(b.data)], third: Option.isSome(c) }
        }),
      )
      expect(got.first.duplicate).toBe(false)
      expect(got.again.duplicate).toBe(true)
      expect(got.data).toEqual(["a", "b"])
      expect(got.third).toBe(false)
    })

    it("redelivers an item not acked within the ack wait, counting deliveries", async () => {
      const counts = await run((bus, id) =>
        Effect.gen(function* () {
          const stream = yield* workQueue(bus, id)
          yield* bus.jsPublish(`wq.${id}.x`, bytes("slow"))
          const q = yield* drainInto(bus.consume(stream, "workers"))
          const first = yield* Queue.take(q)
          const second = yield* Queue.take(q)
          yield* second.ack
          return [first.deliveryCount, second.deliveryCount]
        }),
      )
      expect(counts).toEqual([1, 2])
    })

    it("nak with a delay redelivers after the delay, not before", async () => {
      const got = await run((bus, id) =>
        Effect.gen(function* () {
          const stream = yield* workQueue(bus, id)
          yield* bus.jsPublish(`wq.${id}.x`, bytes("n"))
          const q = yield* drainInto(bus.consume(stream, "workers"))
          const first = yield* Queue.take(q)
          const nakAt = Date.now()
          yield* first.nak(400)
          const again = yield* Queue.take(q)
          const waited = Date.now() - nakAt
          yield* again.ack
          return { waited, count: again.deliveryCount }
        }),
      )
      expect(got.waited).toBeGreaterThanOrEqual(350)
      expect(got.count).toBe(2)
    })

    it("working() heartbeats keep a long item from being redelivered", async () => {
      const redelivered = await run((bus, id) =>
        Effect.gen(function* () {
          const stream = yield* workQueue(bus, id)
          yield* bus.jsPublish(`wq.${id}.x`, bytes("long"))
          const q = yield* drainInto(bus.consume(stream, "workers"))
          const item = yield* Queue.take(q)
          for (let i = 0; i < 5; i++) {
            yield* Effect.sleep(`${Math.floor(ackWaitMs / 2)} millis`)
            yield* item.working
          }
          const other = yield* takeWithin(q, 10)
          yield* item.ack
          return Option.isSome(other)
        }),
      )
      expect(redelivered).toBe(false)
    })

    it("term() and maxDeliver stop redelivery", async () => {
      const got = await run((bus, id) =>
        Effect.gen(function* () {
          const stream = yield* workQueue(bus, id, 2)
          yield* bus.jsPublish(`wq.${id}.poison`, bytes("p"))
          yield* bus.jsPublish(`wq.${id}.flaky`, bytes("f"))
          const q = yield* drainInto(bus.consume(stream, "workers"))
          const deliveries: string[] = []
          for (;;) {
            const next = yield* takeWithin(q, ackWaitMs * 2)
            if (Option.isNone(next)) break
            const item = next.value
            deliveries.push(`${text(item.data)}${item.deliveryCount}`)
            if (text(item.data) === "p") yield* item.term("poison")
            else yield* item.nak()
          }
          return deliveries.sort()
        }),
      )
      expect(got).toEqual(["f1", "f2", "p1"])
    })

    it("shares a work queue between pullers without duplicates", async () => {
      const got = await run((bus, id) =>
        Effect.gen(function* () {
          const stream = yield* workQueue(bus, id)
          const a = yield* drainInto(bus.consume(stream, "workers", { maxInFlight: 2 }))
          const b = yield* drainInto(bus.consume(stream, "workers", { maxInFlight: 2 }))
          for (let i = 0; i < 20; i++) yield* bus.jsPublish(`wq.${id}.x`, bytes(String(i)))
          const seen: string[] = []
          for (;;) {
            const next = yield* Effect.race(takeWithin(a, 400), takeWithin(b, 400))
            if (Option.isNone(next)) break
            seen.push(text(next.value.data))
            yield* next.value.ack
          }
          return seen
        }),
      )
      expect(got).toHaveLength(20)
      expect(new Set(got).size).toBe(20)
    })

    it("KV: put, get, create, compare-and-set, delete, keys", async () => {
      const got = await run((bus, id) =>
        Effect.gen(function* () {
          const kv = yield* bus.kv(`kv_${id}`)
          const r1 = yield* kv.put("job.a", bytes("1"))
          const created = yield* Effect.exit(kv.create("job.a", bytes("x")))
          const r2 = yield* kv.update("job.a", bytes("2"), r1)
          const stale = yield* Effect.exit(kv.update("job.a", bytes("3"), r1))
          yield* kv.create("job.b", bytes("b"))
          yield* kv.delete("job.b")
          const a = yield* kv.get("job.a")
          const b = yield* kv.get("job.b")
          const recreated = yield* kv.create("job.b", bytes("again"))
          const keys = yield* kv.keys
          return {
            r2gtr1: r2 > r1,
            created: failureTag(created),
            stale: failureTag(stale),
            a: Option.map(a, (e) => text(e.value)),
            b: Option.isNone(b),
            recreated: recreated > r2,
            keys: [...keys].sort(),
          }
        }),
      )
      expect(got).toEqual({
        r2gtr1: true,
        created: "KvConflict",
        stale: "KvConflict",
        a: Option.some("2"),
        b: true,
        recreated: true,
        keys: ["job.a", "job.b"],
      })
    })

    it("KV watch: current values first, then changes including deletes", async () => {
      const got = await run((bus, id) =>
        Effect.gen(function* () {
          const kv = yield* bus.kv(`kv_${id}`)
          yield* kv.put("jobs.a", bytes("1"))
          yield* kv.put("jobs.b", bytes("2"))
          yield* kv.put("other.c", bytes("3"))
          yield* kv.put("jobs.gone", bytes("x"))
          yield* kv.delete("jobs.gone")
          const watch = yield* drainInto(yield* kv.watch("jobs.>"))
          const initial = [yield* Queue.take(watch), yield* Queue.take(watch)]
          yield* kv.put("jobs.a", bytes("1b"))
          yield* kv.delete("jobs.b")
          const changes = [yield* Queue.take(watch), yield* Queue.take(watch)]
          return [...initial, ...changes].map((e) => `${e.key}=${e.operation}:${text(e.value)}`)
        }),
      )
      expect(got.slice(0, 2).sort()).toEqual(["jobs.a=put:1", "jobs.b=put:2"])
      expect(got[2]).toBe("jobs.a=put:1b")
      expect(got[3]?.startsWith("jobs.b=delete")).toBe(true)
    })

    it("object store: a blob larger than max_payload round-trips", async () => {
      const got = await run((bus, id) =>
        Effect.gen(function* () {
          const store = yield* bus.objectStore(`obj_${id}`)
          const blob = new Uint8Array(3 * 1024 * 1024 + 17)
          for (let i = 0; i < blob.length; i++) blob[i] = (i * 31) & 0xff
          const info = yield* store.put("weights/v1", blob)
          const back = yield* store.get("weights/v1")
          const missing = yield* store.get("weights/v2")
          yield* store.delete("weights/v1")
          const deleted = yield* store.get("weights/v1")
          return {
            size: info.size,
            equal: Option.isSome(back) && Buffer.compare(back.value, blob) === 0,
            missing: Option.isNone(missing),
            deleted: Option.isNone(deleted),
          }
        }),
      )
      expect(got).toEqual({ size: 3 * 1024 * 1024 + 17, equal: true, missing: true, deleted: true })
    })
  })
}
