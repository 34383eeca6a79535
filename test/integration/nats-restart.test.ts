import { randomUUID } from "node:crypto"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { Deferred, Effect, Fiber, Stream } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Bus, type PublishAck, type WorkItem } from "../../services/bus/bus.ts"
import { NatsBusLive } from "../../services/bus/nats.ts"
import { type NatsServerProcess, startNatsServer } from "../support/nats-server.ts"

/**
 * Crash recovery of the JetStream work queue: a private nats-server is SIGKILLed while a consumer
 * pool is mid-way through the queue, then restarted on the same port and store. The consumer
 * streams opened before the crash must carry on by themselves once the client reconnects, and a
 * publisher that retries across the crash (same Nats-Msg-Id) must not create new work.
 * Redeliveries are allowed; double processing is not (the processor is idempotent by item id).
 */

const ITEMS = 200
/** The publisher "did not hear back" for these, so it sends them again across the crash. */
const RETRIED = 50
const KILL_AFTER = 40
const PULLERS = 2
const MAX_IN_FLIGHT = 8
const CONCURRENCY_PER_PULLER = 4
/** Processing takes 20–80 ms, varied so that completions do not line up in rounds. */
const processMs = (key: string) => 20 + ((Number(key.slice(-3)) * 37) % 61)
const ACK_WAIT_MS = 1500
const MAX_DELIVER = 20
/** How long the server stays dead; the crash itself needs wall-clock time to pass. */
const DOWNTIME_MS = 500

const bytes = (s: string) => new TextEncoder().encode(s)
const text = (b: Uint8Array) => new TextDecoder().decode(b)
const itemId = (i: number) => `item-${String(i).padStart(3, "0")}`

interface Delivery {
  readonly id: string
  readonly seq: number
  readonly deliveryCount: number
  readonly puller: number
}

interface Report {
  readonly published: ReadonlyArray<PublishAck>
  readonly retried: ReadonlyArray<PublishAck>
  readonly deliveries: ReadonlyArray<Delivery>
  readonly processed: ReadonlyArray<string>
  readonly effective: number
  readonly redeliveredWhileProcessing: number
  readonly doneAtKill: number
  readonly inFlightAtKill: number
  readonly deliveredUnackedAtKill: number
  readonly deliveriesAfterRestart: number
  readonly deliveriesAfterDone: number
  /** Ids the processor acked before the kill, or while the server was down. */
  readonly ackedBeforeKill: ReadonlyArray<string>
  readonly ackedWhileDown: number
  /** Of those, ids delivered again after the restart: their ack never landed or was lost. */
  readonly redeliveredAfterAck: number
  readonly final: QueueState
}

interface QueueState {
  /** Delivered to the consumer and not acked yet. */
  readonly ackPending: number
  /** Not delivered yet. */
  readonly pending: number
  /** Sequences still stored in the work-queue stream. */
  readonly stored: ReadonlyArray<number>
}

/** The server's own view of the queue, read on a separate connection. */
const inspect = (srv: NatsServerProcess, stream: string, durable: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const nc = yield* Effect.acquireRelease(
        Effect.promise(() => connect({ servers: srv.url, name: "t1-restart-inspect" })),
        (c) => Effect.promise(() => c.close()),
      )
      return yield* Effect.promise(async (): Promise<QueueState> => {
        const jsm = await jetstreamManager(nc)
        const { state } = await jsm.streams.info(stream, { deleted_details: true })
        const c = await jsm.consumers.info(stream, durable)
        const deleted = new Set(state.deleted ?? [])
        const stored: number[] = []
        if (state.messages > 0) {
          for (let q = state.first_seq; q <= state.last_seq; q++)
            if (!deleted.has(q)) stored.push(q)
        }
        return { ackPending: c.num_ack_pending, pending: c.num_pending, stored }
      })
    }),
  )

let server: NatsServerProcess | undefined

beforeAll(async () => {
  // No skip: this test must own (and kill) its server; startNatsServer says how to install one.
  server = await startNatsServer()
})
afterAll(async () => {
  await server?.stop()
})

const scenario = (srv: NatsServerProcess) =>
  Effect.gen(function* () {
    const bus = yield* Bus
    const id = randomUUID().replaceAll("-", "").slice(0, 12)
    const stream = `RESTART_${id}`
    const subject = `restart.${id}.item`
    yield* bus.ensureStream({
      name: stream,
      subjects: [`restart.${id}.>`],
      retention: "workqueue",
      storage: "file",
    })
    yield* bus.ensureConsumer({
      stream,
      durable: "workers",
      ackWaitMs: ACK_WAIT_MS,
      maxDeliver: MAX_DELIVER,
    })

    const publishItem = (i: number) =>
      bus.jsPublish(subject, bytes(itemId(i)), { msgId: `${stream}:${itemId(i)}` })
    const published = yield* Effect.forEach(
      Array.from({ length: ITEMS }, (_, i) => i),
      publishItem,
      { concurrency: 16 },
    )

    // The processor, idempotent by item id like the real sampler: the first delivery of an id
    // does the work; a redelivery waits for that work, then only acks.
    const deliveries: Delivery[] = []
    const claims = new Map<string, Deferred.Deferred<void>>()
    const done = new Set<string>()
    let effective = 0
    let inFlight = 0
    let redeliveredWhileProcessing = 0
    let acked = 0
    const ackedIds = new Set<string>()
    const killPoint = yield* Deferred.make<void>()
    const allDone = yield* Deferred.make<void>()

    const handle = (puller: number) => (item: WorkItem) =>
      Effect.gen(function* () {
        const key = text(item.data)
        deliveries.push({
          id: key,
          seq: item.streamSeq,
          deliveryCount: item.deliveryCount,
          puller,
        })
        const claim = claims.get(key)
        if (claim !== undefined) {
          if (!done.has(key)) redeliveredWhileProcessing++
          yield* Deferred.await(claim)
          yield* item.ack
          acked++
          ackedIds.add(key)
          return
        }
        const mine = yield* Deferred.make<void>()
        claims.set(key, mine)
        inFlight++
        yield* Effect.sleep(processMs(key))
        done.add(key)
        effective++
        inFlight--
        yield* Deferred.succeed(mine, undefined)
        yield* item.ack
        acked++
        ackedIds.add(key)
        if (effective === KILL_AFTER) yield* Deferred.succeed(killPoint, undefined)
        if (done.size === ITEMS) yield* Deferred.succeed(allDone, undefined)
      })

    const pullers = yield* Effect.forEach(
      Array.from({ length: PULLERS }, (_, p) => p),
      (p) =>
        Effect.forkScoped(
          Stream.runDrain(
            bus.consume(stream, "workers", { maxInFlight: MAX_IN_FLIGHT }).pipe(
              Stream.mapEffect(handle(p), {
                concurrency: CONCURRENCY_PER_PULLER,
                unordered: true,
              }),
            ),
          ),
        ),
    )
    // A puller stream that ends or fails before the work is done is a failure of the adapter.
    const pullerEnded = Effect.raceAll(
      pullers.map((f) =>
        Effect.flatMap(Effect.exit(Fiber.join(f)), (exit) =>
          Effect.die(new Error(`a consumer stream ended before the queue was drained: ${exit}`)),
        ),
      ),
    )
    const untilOrPullerEnds = <A, E>(eff: Effect.Effect<A, E>, what: () => string, ms: number) =>
      Effect.raceFirst(eff, pullerEnded).pipe(
        Effect.timeoutOrElse({
          duration: `${ms} millis`,
          orElse: () =>
            Effect.die(
              new Error(
                `${what()} within ${ms} ms: ${done.size}/${ITEMS} done, ${inFlight} in flight`,
              ),
            ),
        }),
      )

    yield* untilOrPullerEnds(Deferred.await(killPoint), () => "kill point not reached", 10_000)
    const doneAtKill = done.size
    const inFlightAtKill = inFlight
    const deliveredUnackedAtKill = deliveries.length - acked
    const ackedBeforeKill = new Set(ackedIds)
    yield* Effect.promise(() => srv.kill())

    // The publisher retries the tail of its batch while the server is down; the retries must
    // complete once it is back, and be recognised as duplicates of what is stored.
    const retry = yield* Effect.forkScoped(
      Effect.forEach(
        Array.from({ length: RETRIED }, (_, k) => ITEMS - RETRIED + k),
        publishItem,
        { concurrency: 10 },
      ),
    )
    yield* Effect.sleep(DOWNTIME_MS)
    const deliveriesBeforeRestart = deliveries.length
    const ackedWhileDown = new Set([...ackedIds].filter((k) => !ackedBeforeKill.has(k)))
    yield* Effect.promise(() => srv.restart())

    yield* untilOrPullerEnds(Deferred.await(allDone), () => "the queue was not drained", 15_000)
    const retried = yield* untilOrPullerEnds(
      Fiber.join(retry),
      () => "retried publishes did not complete",
      10_000,
    )
    const doneAt = deliveries.length
    let lastState: QueueState | undefined
    // Anything still owed (an ack lost in the crash) comes back within an ack wait and is acked
    // again; then the consumer owes nothing.
    const final = yield* untilOrPullerEnds(
      Effect.gen(function* () {
        for (;;) {
          const state = yield* inspect(srv, stream, "workers")
          lastState = state
          if (state.ackPending === 0 && state.pending === 0) return state
          yield* Effect.sleep(100)
        }
      }),
      () => `the consumer still owes work (last seen ${JSON.stringify(lastState)})`,
      ACK_WAIT_MS * 4 + 5_000,
    )

    const report: Report = {
      published,
      retried,
      deliveries: [...deliveries],
      processed: [...done],
      effective,
      redeliveredWhileProcessing,
      doneAtKill,
      inFlightAtKill,
      deliveredUnackedAtKill,
      deliveriesAfterRestart: deliveries.length - deliveriesBeforeRestart,
      deliveriesAfterDone: deliveries.length - doneAt,
      ackedBeforeKill: [...ackedBeforeKill],
      ackedWhileDown: ackedWhileDown.size,
      redeliveredAfterAck: new Set(
        deliveries
          .slice(deliveriesBeforeRestart)
          .filter((d) => ackedBeforeKill.has(d.id) || ackedWhileDown.has(d.id))
          .map((d) => d.id),
      ).size,
      final,
    }
    return report
  })

describe("NATS JetStream work queue across a server crash", () => {
  it("processes every item exactly once after SIGKILL + restart, with redeliveries and deduped retries", async () => {
    const srv = server as NatsServerProcess
    const started = Date.now()
    const report = await Effect.runPromise(
      Effect.scoped(scenario(srv)).pipe(
        Effect.provide(NatsBusLive({ servers: srv.url, name: "t1-restart-test" })),
      ),
    )
    const elapsed = Date.now() - started

    const ids = Array.from({ length: ITEMS }, (_, i) => itemId(i))
    // The crash hit a queue with work left in it and work in flight.
    expect(report.doneAtKill).toBeLessThan(ITEMS / 2)
    expect(report.inFlightAtKill).toBeGreaterThan(0)
    expect(report.deliveriesAfterRestart).toBeGreaterThan(0)

    // Nothing lost, nothing processed twice.
    expect([...report.processed].sort()).toEqual(ids)
    expect(report.effective).toBe(ITEMS)
    expect(report.final.ackPending).toBe(0)
    expect(report.final.pending).toBe(0)

    // The original publishes stored each item once.
    expect(report.published.every((a) => !a.duplicate)).toBe(true)
    const seqOf = new Map(report.published.map((a, i) => [ids[i], a.seq]))
    expect(new Set(seqOf.values()).size).toBe(ITEMS)
    // The retries were recognised as duplicates of the stored messages...
    expect(report.retried.map((a) => a.duplicate)).toEqual(Array(RETRIED).fill(true))
    expect(report.retried.map((a) => a.seq)).toEqual(
      report.published.slice(ITEMS - RETRIED).map((a) => a.seq),
    )
    // ...so every delivery is of an originally stored message, never a new copy.
    for (const d of report.deliveries) expect(d.seq).toBe(seqOf.get(d.id))

    // The consumer owes nothing, so the queue is empty but for messages whose ack the consumer
    // recorded before the crash while the stream's removal of them was lost (nats-server 2.9
    // leaves such orphans in a work queue; nats-io/nats-server#5227 in 2.10 cleans them up).
    // They were acked before the kill, so their work was done.
    const seqsAckedBeforeKill = new Set(report.ackedBeforeKill.map((k) => seqOf.get(k)))
    expect(report.final.stored.filter((q) => !seqsAckedBeforeKill.has(q))).toEqual([])

    const redeliveries = report.deliveries.filter((d) => d.deliveryCount > 1).length
    const repeatedIds = report.deliveries.length - new Set(report.deliveries.map((d) => d.id)).size
    console.info(
      `nats-restart: ${ITEMS} items, ${report.deliveries.length} deliveries ` +
        `(${redeliveries} with deliveryCount > 1, ${repeatedIds} repeats of an id), ` +
        `at kill: ${report.doneAtKill} done, ${report.inFlightAtKill} processing, ` +
        `${report.deliveredUnackedAtKill} delivered un-acked; ` +
        `${report.deliveriesAfterRestart} deliveries after restart, ` +
        `${report.deliveriesAfterDone} after all were done, ` +
        `${report.redeliveredWhileProcessing} while the first delivery was still processing; ` +
        `acked before kill ${report.ackedBeforeKill.length}, while down ${report.ackedWhileDown}, ` +
        `of those redelivered after restart ${report.redeliveredAfterAck}; ` +
        `${report.final.stored.length} acked orphans left in the stream; ` +
        `${RETRIED} retried publishes all duplicate; ${elapsed} ms`,
    )
  }, 30_000)
})
