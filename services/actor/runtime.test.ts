import { create, toBinary } from "@bufbuild/protobuf"
import {
  Deferred,
  Effect,
  Fiber,
  Layer,
  Logger,
  Option,
  Queue,
  Ref,
  type Scope,
  Stream,
} from "effect"
import { describe, expect, it } from "vitest"
import { PingSchema } from "../../proto/index.ts"
import { Bus, type BusShape, MemoryBusLive } from "../bus/index.ts"
import { Metrics, type MetricsShape, makeMetrics } from "../metrics/index.ts"
import { protobufDecoder } from "./decode.ts"
import { ERROR_HEADER, runActor } from "./runtime.ts"

const ping = (nonce: string) => toBinary(PingSchema, create(PingSchema, { nonce }))
const decodePing = protobufDecoder(PingSchema)

interface World {
  readonly bus: BusShape
  readonly metrics: MetricsShape
  readonly logs: string[]
}

const run = <A, E>(
  f: (w: World) => Effect.Effect<A, E, Scope.Scope | Bus | Metrics>,
): Promise<{ result: A; world: World }> => {
  const metrics = makeMetrics({ defaultMetrics: false })
  const logs: string[] = []
  const capture = Logger.make<unknown, void>(({ message }) => {
    logs.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
  })
  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const bus = yield* Bus
        const world = { bus, metrics, logs }
        return { result: yield* f(world), world }
      }),
    ).pipe(
      Effect.provide(Layer.mergeAll(MemoryBusLive(), Layer.succeed(Metrics, metrics))),
      Effect.provide(Logger.layer([capture])),
    ),
  )
}

const workQueue = (bus: BusShape, ackWaitMs = 2000) =>
  Effect.gen(function* () {
    yield* bus.ensureStream({ name: "WORK", subjects: ["work.>"], retention: "workqueue" })
    yield* bus.ensureConsumer({ stream: "WORK", durable: "w", ackWaitMs, maxDeliver: 5 })
  })

const metricValue = async (metrics: MetricsShape, name: string, labels: Record<string, string>) => {
  const metric = await metrics.registry.getSingleMetric(name)?.get()
  const hit = metric?.values.find((v) =>
    Object.entries(labels).every(([k, val]) => v.labels[k] === val),
  )
  return hit?.value ?? 0
}

describe("actor runtime", () => {
  it("handles work with bounded concurrency and acks each item once", async () => {
    const { result } = await run(({ bus }) =>
      Effect.gen(function* () {
        yield* workQueue(bus)
        const active = yield* Ref.make(0)
        const peak = yield* Ref.make(0)
        const done = yield* Queue.unbounded<string>()
        yield* Effect.forkScoped(
          runActor(
            {
              name: "worker",
              mailbox: { kind: "work-queue", stream: "WORK", durable: "w" },
              decode: decodePing,
              handle: (p) =>
                Effect.gen(function* () {
                  const now = yield* Ref.updateAndGet(active, (n) => n + 1)
                  yield* Ref.update(peak, (n) => Math.max(n, now))
                  yield* Effect.sleep("20 millis")
                  yield* Ref.update(active, (n) => n - 1)
                  yield* Queue.offer(done, p.nonce)
                }),
            },
            { concurrency: 3 },
          ),
        )
        for (let i = 0; i < 12; i++) yield* bus.jsPublish(`work.${i}`, ping(`n${i}`))
        const seen: string[] = []
        for (let i = 0; i < 12; i++) seen.push(yield* Queue.take(done))
        const extra = yield* Effect.timeoutOption(Queue.take(done), "300 millis")
        return { seen: seen.sort(), peak: yield* Ref.get(peak), extra: Option.isSome(extra) }
      }),
    )
    expect(new Set(result.seen).size).toBe(12)
    expect(result.peak).toBe(3)
    expect(result.extra).toBe(false)
  })

  it("counts malformed messages, logs each kind once, terms them and keeps running", async () => {
    const { result, world } = await run(({ bus }) =>
      Effect.gen(function* () {
        yield* workQueue(bus, 300)
        const done = yield* Queue.unbounded<string>()
        yield* Effect.forkScoped(
          runActor({
            name: "worker",
            mailbox: { kind: "work-queue", stream: "WORK", durable: "w" },
            decode: decodePing,
            handle: (p) => Queue.offer(done, p.nonce),
          }),
        )
        for (let i = 0; i < 3; i++)
          yield* bus.jsPublish("work.bad", new Uint8Array([0xff, 0xff, 0xff]))
        yield* bus.jsPublish("work.good", ping("ok"))
        const good = yield* Queue.take(done)
        // Longer than the ack wait: a malformed item must not come back.
        const again = yield* Effect.timeoutOption(Queue.take(done), "700 millis")
        return { good, again: Option.isSome(again) }
      }),
    )
    expect(result).toEqual({ good: "ok", again: false })
    expect(
      await metricValue(world.metrics, "t1_bus_decode_failures_total", { kind: "protobuf" }),
    ).toBe(3)
    expect(world.logs.filter((l) => l.includes("malformed")).length).toBe(1)
  })

  it("redelivers a failed item with backoff until it succeeds", async () => {
    const { result } = await run(({ bus }) =>
      Effect.gen(function* () {
        yield* workQueue(bus)
        const attempts = yield* Queue.unbounded<number>()
        yield* Effect.forkScoped(
          runActor(
            {
              name: "flaky",
              mailbox: { kind: "work-queue", stream: "WORK", durable: "w" },
              decode: decodePing,
              handle: (_p, d) =>
                Effect.gen(function* () {
                  const n = d.item?.deliveryCount ?? 0
                  yield* Queue.offer(attempts, n)
                  if (n < 3) return yield* Effect.fail("transient")
                }),
            },
            { retryDelayMs: 50 },
          ),
        )
        yield* bus.jsPublish("work.x", ping("x"))
        const seen = [
          yield* Queue.take(attempts),
          yield* Queue.take(attempts),
          yield* Queue.take(attempts),
        ]
        const more = yield* Effect.timeoutOption(Queue.take(attempts), "400 millis")
        return { seen, more: Option.isSome(more) }
      }),
    )
    expect(result).toEqual({ seen: [1, 2, 3], more: false })
  })

  it("on shutdown finishes in-flight work within the grace period and takes no more", async () => {
    const { result } = await run(({ bus }) =>
      Effect.gen(function* () {
        yield* workQueue(bus)
        const started = yield* Deferred.make<void>()
        const finished = yield* Ref.make<string[]>([])
        const fiber = yield* Effect.forkChild(
          runActor(
            {
              name: "slow",
              mailbox: { kind: "work-queue", stream: "WORK", durable: "w" },
              decode: decodePing,
              handle: (p) =>
                Effect.gen(function* () {
                  yield* Deferred.succeed(started, undefined)
                  yield* Effect.sleep("200 millis")
                  yield* Ref.update(finished, (xs) => [...xs, p.nonce])
                }),
            },
            { concurrency: 1, shutdownGraceMs: 5000 },
          ),
        )
        yield* bus.jsPublish("work.1", ping("first"))
        yield* bus.jsPublish("work.2", ping("second"))
        yield* Deferred.await(started)
        yield* Fiber.interrupt(fiber)
        return yield* Ref.get(finished)
      }),
    )
    expect(result).toEqual(["first"])
  })

  it("naks in-flight work when the grace period runs out, so another replica takes it", async () => {
    const { result } = await run(({ bus }) =>
      Effect.gen(function* () {
        yield* workQueue(bus, 30_000)
        const started = yield* Deferred.make<void>()
        const stuck = yield* Effect.forkChild(
          runActor(
            {
              name: "stuck",
              mailbox: { kind: "work-queue", stream: "WORK", durable: "w" },
              decode: decodePing,
              handle: () => Effect.andThen(Deferred.succeed(started, undefined), Effect.never),
            },
            { shutdownGraceMs: 100 },
          ),
        )
        yield* bus.jsPublish("work.1", ping("hard"))
        yield* Deferred.await(started)
        yield* Fiber.interrupt(stuck)
        const taken = yield* Deferred.make<{ nonce: string; delivery: number }>()
        yield* Effect.forkScoped(
          runActor({
            name: "replica",
            mailbox: { kind: "work-queue", stream: "WORK", durable: "w" },
            decode: decodePing,
            handle: (p, d) =>
              Deferred.succeed(taken, { nonce: p.nonce, delivery: d.item?.deliveryCount ?? 0 }),
          }),
        )
        // Far sooner than the 30 s ack wait: only an explicit nak brings it back this fast.
        return yield* Effect.timeout(Deferred.await(taken), "3 seconds")
      }),
    )
    expect(result).toEqual({ nonce: "hard", delivery: 2 })
  })

  it("restarts a failed mailbox with backoff until it works", async () => {
    const { result, world } = await run(({ bus }) =>
      Effect.gen(function* () {
        const done = yield* Deferred.make<string>()
        yield* Effect.forkScoped(
          runActor(
            {
              name: "early",
              mailbox: { kind: "work-queue", stream: "WORK", durable: "w" },
              decode: decodePing,
              handle: (p) => Deferred.succeed(done, p.nonce),
            },
            { restartDelayMs: 20 },
          ),
        )
        yield* Effect.sleep("150 millis")
        yield* workQueue(bus)
        yield* bus.jsPublish("work.1", ping("late"))
        return yield* Effect.timeout(Deferred.await(done), "5 seconds")
      }),
    )
    expect(result).toBe("late")
    expect(
      await metricValue(world.metrics, "t1_actor_restarts_total", { actor: "early" }),
    ).toBeGreaterThan(0)
    // Said once, not before every restart while the stream was missing.
    expect(world.logs.filter((l) => l.includes("early: taking messages"))).toHaveLength(1)
  })

  it("says it is taking messages only once its subscription is live", async () => {
    const { world } = await run(({ bus, logs }) =>
      Effect.gen(function* () {
        // The bus as the actor sees it, noting when a subscription is in place.
        const noting: BusShape = {
          ...bus,
          subscribe: (subject, options) =>
            Effect.tap(bus.subscribe(subject, options), () =>
              Effect.sync(() => logs.push(`subscribed ${subject}`)),
            ),
        }
        yield* Effect.forkScoped(
          runActor({
            name: "echo",
            mailbox: { kind: "subscription", subject: "t1.echo" },
            decode: decodePing,
            handle: (p, d) => d.respond(new TextEncoder().encode(p.nonce)),
          }).pipe(Effect.provideService(Bus, noting)),
        )
        yield* Effect.sleep("100 millis")
      }),
    )
    const subscribed = world.logs.indexOf("subscribed t1.echo")
    const ready = world.logs.findIndex((l) => l.includes("echo: taking messages from t1.echo"))
    expect(subscribed).toBeGreaterThanOrEqual(0)
    expect(ready).toBeGreaterThan(subscribed)
  })

  it("answers requests and tells the requester when its request was malformed", async () => {
    const { result } = await run(({ bus }) =>
      Effect.gen(function* () {
        yield* Effect.forkScoped(
          runActor({
            name: "echo",
            mailbox: { kind: "subscription", subject: "t1.echo", queue: "echo" },
            decode: decodePing,
            handle: (p, d) => d.respond(new TextEncoder().encode(p.nonce.toUpperCase())),
          }),
        )
        const sub = yield* bus.subscribe("t1.echo")
        yield* Effect.forkScoped(Stream.runDrain(sub))
        // The actor subscribes in the background: retry until it answers.
        const ok = yield* bus
          .request("t1.echo", ping("hi"), { timeoutMs: 200 })
          .pipe(Effect.retry({ times: 20 }))
        const bad = yield* bus.request("t1.echo", new Uint8Array([0xff, 0xff]), { timeoutMs: 1000 })
        return { ok: new TextDecoder().decode(ok.data), bad: bad.headers[ERROR_HEADER] ?? "" }
      }),
    )
    expect(result.ok).toBe("HI")
    expect(result.bad).toContain("malformed")
  })
})
