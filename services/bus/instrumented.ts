import { Effect, Layer, Stream } from "effect"
import { Metrics, type MetricsShape } from "../metrics/index.ts"
import { Bus, type BusShape } from "./bus.ts"
import type { BusError } from "./errors.ts"
import { subjectFamily } from "./subjects.ts"

const LATENCY_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
]

/** The bus's Prometheus series; subject labels are families (`t1.sandbox`), never raw ids. */
export const busMetrics = (metrics: MetricsShape) => ({
  messages: metrics.counter({
    name: "t1_bus_messages_total",
    help: "Messages through the bus, by direction (in|out) and subject family",
    labelNames: ["direction", "subject"],
  }),
  bytes: metrics.counter({
    name: "t1_bus_bytes_total",
    help: "Payload bytes through the bus, by direction (in|out) and subject family",
    labelNames: ["direction", "subject"],
  }),
  requestSeconds: metrics.histogram({
    name: "t1_bus_request_duration_seconds",
    help: "Request/reply latency, by subject family and outcome (ok or the error tag)",
    labelNames: ["subject", "outcome"],
    buckets: LATENCY_BUCKETS,
  }),
  redeliveries: metrics.counter({
    name: "t1_bus_redeliveries_total",
    help: "Work items delivered again after a nak, an ack timeout or a crash, by stream",
    labelNames: ["stream"],
  }),
  decodeFailures: metrics.counter({
    name: "t1_bus_decode_failures_total",
    help: "Messages that did not decode as their subject's message type, by subject family and kind",
    labelNames: ["subject", "kind"],
  }),
  errors: metrics.counter({
    name: "t1_bus_errors_total",
    help: "Failed bus operations, by operation and error tag",
    labelNames: ["operation", "error"],
  }),
})

export type BusMetrics = ReturnType<typeof busMetrics>

/** Wraps any adapter so that both record the same series. */
export const instrumentBus = (bus: BusShape, metrics: MetricsShape): BusShape => {
  const m = busMetrics(metrics)
  const out = (subject: string, data: Uint8Array) => {
    const family = subjectFamily(subject)
    m.messages.inc({ direction: "out", subject: family })
    m.bytes.inc({ direction: "out", subject: family }, data.byteLength)
  }
  const inbound = (subject: string, data: Uint8Array) => {
    const family = subjectFamily(subject)
    m.messages.inc({ direction: "in", subject: family })
    m.bytes.inc({ direction: "in", subject: family }, data.byteLength)
  }
  const counted =
    (operation: string) =>
    <A, R>(effect: Effect.Effect<A, BusError, R>): Effect.Effect<A, BusError, R> =>
      Effect.tapError(effect, (e) => Effect.sync(() => m.errors.inc({ operation, error: e._tag })))

  return {
    ...bus,
    publish: (subject, data, headers) =>
      counted("publish")(bus.publish(subject, data, headers)).pipe(
        Effect.tap(() => Effect.sync(() => out(subject, data))),
      ),
    subscribe: (subject, options) =>
      counted("subscribe")(bus.subscribe(subject, options)).pipe(
        Effect.map(Stream.tap((msg) => Effect.sync(() => inbound(msg.subject, msg.data)))),
      ),
    request: (subject, data, options) =>
      Effect.suspend(() => {
        const family = subjectFamily(subject)
        const end = m.requestSeconds.startTimer({ subject: family })
        return counted("request")(bus.request(subject, data, options)).pipe(
          Effect.tap((reply) =>
            Effect.sync(() => {
              out(subject, data)
              inbound(reply.subject, reply.data)
              end({ outcome: "ok" })
            }),
          ),
          Effect.tapError((e) => Effect.sync(() => end({ outcome: e._tag }))),
        )
      }),
    respond: (request, data, headers) =>
      counted("respond")(bus.respond(request, data, headers)).pipe(
        Effect.tap(() =>
          Effect.sync(() => {
            if (request.reply !== undefined) out(request.reply, data)
          }),
        ),
      ),
    jsPublish: (subject, data, options) =>
      counted("jsPublish")(bus.jsPublish(subject, data, options)).pipe(
        Effect.tap(() => Effect.sync(() => out(subject, data))),
      ),
    consume: (stream, durable, options) =>
      bus.consume(stream, durable, options).pipe(
        Stream.tap((item) =>
          Effect.sync(() => {
            inbound(item.subject, item.data)
            if (item.deliveryCount > 1) m.redeliveries.inc({ stream })
          }),
        ),
      ),
  }
}

/** A bus layer with the bus series recorded in the process's Metrics. */
export const withBusMetrics = <E, R>(
  layer: Layer.Layer<Bus, E, R>,
): Layer.Layer<Bus, E, R | Metrics> =>
  Layer.effect(
    Bus,
    Effect.gen(function* () {
      const metrics = yield* Metrics
      const bus = yield* Bus
      return instrumentBus(bus, metrics)
    }),
  ).pipe(Layer.provide(layer))
