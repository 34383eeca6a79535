import { randomUUID } from "node:crypto"
import { Effect, Option, Queue, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { useNatsServer } from "../../test/support/nats-url.ts"
import { busContract } from "./bus.contract.ts"
import { Bus, type BusShape } from "./bus.ts"
import { NatsBusLive } from "./nats.ts"

const nats = useNatsServer()

busContract("NATS", () => NatsBusLive({ servers: nats.url, name: "t1-contract-test" }))

describe("NATS bus: acks", () => {
  const ACK_WAIT_MS = 500
  const withBus = <A, E>(f: (bus: BusShape) => Effect.Effect<A, E>) =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          return yield* f(yield* Bus)
        }),
      ).pipe(Effect.provide(NatsBusLive({ servers: nats.url, name: "t1-ack-test" }))),
    )

  it("acks queued in the last turn before the bus closes still reach the server", async () => {
    const id = randomUUID().replaceAll("-", "").slice(0, 12)
    const stream = `ACKS_${id}`
    const count = 20
    const acked = await withBus((bus) =>
      Effect.scoped(
        Effect.gen(function* () {
          yield* bus.ensureStream({
            name: stream,
            subjects: [`acks.${id}`],
            retention: "workqueue",
            storage: "memory",
          })
          yield* bus.ensureConsumer({ stream, durable: "w", ackWaitMs: ACK_WAIT_MS, maxDeliver: 5 })
          for (let i = 0; i < count; i++) yield* bus.jsPublish(`acks.${id}`, new Uint8Array([i]))
          const q = yield* Queue.unbounded<number>()
          // The stream acks each item and the scope closes right after the last one.
          yield* Effect.forkScoped(
            Stream.runForEach(bus.consume(stream, "w", { maxInFlight: count }), (item) =>
              Effect.andThen(item.ack, Queue.offer(q, item.data[0] ?? -1)),
            ),
          )
          const seen: number[] = []
          for (let i = 0; i < count; i++) seen.push(yield* Queue.take(q))
          return seen
        }),
      ),
    )
    expect(acked).toHaveLength(count)
    // A second connection: an ack lost at close would come back after the ack wait.
    const again = await withBus((bus) =>
      Effect.scoped(
        Effect.gen(function* () {
          const q = yield* Queue.unbounded<number>()
          yield* Effect.forkScoped(
            Stream.runForEach(bus.consume(stream, "w"), (item) =>
              Queue.offer(q, item.data[0] ?? -1),
            ),
          )
          return yield* Effect.timeoutOption(Queue.take(q), `${ACK_WAIT_MS * 3} millis`)
        }),
      ),
    )
    expect(Option.isNone(again)).toBe(true)
  })
})
