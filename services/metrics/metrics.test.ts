import { request } from "node:http"
import { connect } from "node:net"
import { Deferred, Effect, Exit, Layer, Scope } from "effect"
import { describe, expect, it } from "vitest"
import type { MetricsEndpoint, MetricsServerOptions, MetricsShape } from "./index.ts"
import {
  InvalidMetricName,
  MetricConflict,
  Metrics,
  MetricsLive,
  MetricsServer,
  MetricsServerError,
  MetricsServerLive,
  makeMetrics,
  serveMetrics,
} from "./index.ts"

const thrown = (f: () => unknown): unknown => {
  try {
    f()
  } catch (e) {
    return e
  }
  return undefined
}

interface Reply {
  readonly status: number
  readonly contentType: string | undefined
  readonly body: string
}

/** A fresh connection per request, so no client-side pool outlives a test's server. */
const get = (endpoint: MetricsEndpoint, path: string): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port: endpoint.port, path, agent: false }, (res) => {
      let body = ""
      res.setEncoding("utf8")
      res.on("data", (chunk: string) => {
        body += chunk
      })
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, contentType: res.headers["content-type"], body }),
      )
      res.on("error", reject)
    })
    req.on("error", reject)
    req.end()
  })

const connectError = (port: number): Promise<NodeJS.ErrnoException | undefined> =>
  new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port })
    socket.on("connect", () => {
      socket.destroy()
      resolve(undefined)
    })
    socket.on("error", resolve)
  })

/** Runs `use` against a server that stops when `use` settles. */
const withServer = <A>(
  metrics: MetricsShape,
  options: MetricsServerOptions,
  use: (endpoint: MetricsEndpoint) => Promise<A>,
): Promise<A> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(serveMetrics(options), (endpoint) => Effect.promise(() => use(endpoint))),
    ).pipe(Effect.provideService(Metrics, metrics)),
  )

describe("metric names", () => {
  const metrics = makeMetrics({ defaultMetrics: false })

  it("accepts t1_<component>_<thing>_<unit>, with counters ending in _total", () => {
    expect(() => metrics.counter({ name: "t1_sampler_episodes_total", help: "h" })).not.toThrow()
    expect(() => metrics.gauge({ name: "t1_buffer_queue_depth", help: "h" })).not.toThrow()
    expect(() => metrics.histogram({ name: "t1_learner_step_seconds", help: "h" })).not.toThrow()
  })

  it.each([
    ["counter", "sampler_episodes_total", "must match"],
    ["counter", "t1_Sampler_episodes_total", "must match"],
    ["counter", "t1_sampler", "must match"],
    ["counter", "t1_2x_steps_total", "must match"],
    ["counter", "t1_sampler_episodes-done_total", "must match"],
    ["counter", "t1_sampler_episodes", "must end in _total"],
    ["gauge", "t1_buffer_items_total", "only counters end in _total"],
    ["histogram", "t1_learner_step_total", "only counters end in _total"],
  ] as const)("rejects a %s named %s", (kind, name, reason) => {
    const error = thrown(() => metrics[kind]({ name, help: "h" }))
    expect(error).toBeInstanceOf(InvalidMetricName)
    expect((error as InvalidMetricName).message).toContain(name)
    expect((error as InvalidMetricName).message).toContain(reason)
  })
})

describe("get-or-create", () => {
  it("returns the same metric for the same name", () => {
    const metrics = makeMetrics({ defaultMetrics: false })
    const spec = { name: "t1_verifier_checks_total", help: "h", labelNames: ["result"] as const }
    const first = metrics.counter(spec)
    expect(metrics.counter({ ...spec, labelNames: ["result"] })).toBe(first)
    const histogram = metrics.histogram({
      name: "t1_verifier_check_seconds",
      help: "h",
      buckets: [0.1, 1],
    })
    expect(
      metrics.histogram({ name: "t1_verifier_check_seconds", help: "h", buckets: [0.1, 1] }),
    ).toBe(histogram)
  })

  it("fails loudly when the type, labels or buckets differ", () => {
    const metrics = makeMetrics({ defaultMetrics: false })
    metrics.gauge({ name: "t1_buffer_queue_depth", help: "h", labelNames: ["job"] })
    metrics.histogram({ name: "t1_learner_step_seconds", help: "h", buckets: [1, 2] })
    const conflicts = [
      () => metrics.histogram({ name: "t1_buffer_queue_depth", help: "h", labelNames: ["job"] }),
      () => metrics.gauge({ name: "t1_buffer_queue_depth", help: "h", labelNames: ["shard"] }),
      () => metrics.gauge({ name: "t1_buffer_queue_depth", help: "h" }),
      () => metrics.histogram({ name: "t1_learner_step_seconds", help: "h", buckets: [1, 5] }),
    ]
    for (const conflict of conflicts) {
      const error = thrown(conflict)
      expect(error).toBeInstanceOf(MetricConflict)
      expect((error as MetricConflict).message).toMatch(/already registered as/)
    }
  })

  it("will not shadow a default process metric", () => {
    const metrics = makeMetrics()
    const error = thrown(() =>
      metrics.counter({ name: "t1_process_cpu_user_seconds_total", help: "h" }),
    )
    expect(error).toBeInstanceOf(MetricConflict)
  })

  it("keeps each registry separate", () => {
    const a = makeMetrics({ defaultMetrics: false })
    const b = makeMetrics({ defaultMetrics: false })
    expect(a.counter({ name: "t1_x_things_total", help: "h" })).not.toBe(
      b.counter({ name: "t1_x_things_total", help: "h" }),
    )
  })
})

describe("metrics server", () => {
  it("serves counters and default process metrics on /metrics", async () => {
    const metrics = makeMetrics()
    metrics
      .counter({
        name: "t1_sampler_episodes_total",
        help: "Episodes finished",
        labelNames: ["outcome"],
      })
      .inc({ outcome: "resolved" }, 3)
    const reply = await withServer(metrics, {}, (endpoint) => {
      expect(endpoint.host).toBe("127.0.0.1")
      expect(endpoint.port).toBeGreaterThan(0)
      expect(endpoint.url).toBe(`http://127.0.0.1:${endpoint.port}`)
      return get(endpoint, "/metrics")
    })
    expect(reply.status).toBe(200)
    expect(reply.contentType).toBe(metrics.registry.contentType)
    expect(reply.body).toContain('t1_sampler_episodes_total{outcome="resolved"} 3')
    expect(reply.body).toMatch(/^t1_process_cpu_user_seconds_total \d/m)
    expect(reply.body).toMatch(/^t1_process_resident_memory_bytes \d/m)
    expect(reply.body).toContain("t1_nodejs_eventloop_lag_seconds")
  })

  it("answers /healthz with 200 ok when there is no check or it passes", async () => {
    const metrics = makeMetrics({ defaultMetrics: false })
    const plain = await withServer(metrics, {}, (endpoint) => get(endpoint, "/healthz"))
    const passing = await withServer(metrics, { health: Effect.succeed(true) }, (endpoint) =>
      get(endpoint, "/healthz?verbose=1"),
    )
    for (const reply of [plain, passing]) expect(reply).toMatchObject({ status: 200, body: "ok" })
  })

  it("answers /healthz with 503 and the reason when the check fails, dies, says false or hangs", async () => {
    const metrics = makeMetrics({ defaultMetrics: false })
    const cases: ReadonlyArray<[MetricsServerOptions, string]> = [
      [{ health: Effect.fail(new Error("nats unreachable")) }, "nats unreachable"],
      [{ health: Effect.die(new Error("bug in check")) }, "bug in check"],
      [{ health: Effect.succeed(false) }, "health check returned false"],
      [{ health: Effect.never, healthTimeout: "20 millis" }, "health check timed out after 20ms"],
    ]
    for (const [options, reason] of cases) {
      const reply = await withServer(metrics, options, (endpoint) => get(endpoint, "/healthz"))
      expect(reply).toMatchObject({ status: 503, body: reason })
    }
  })

  it("answers 404 for other paths and methods", async () => {
    const metrics = makeMetrics({ defaultMetrics: false })
    const replies = await withServer(metrics, {}, (endpoint) =>
      Promise.all([get(endpoint, "/"), get(endpoint, "/metrics/extra"), get(endpoint, "/health")]),
    )
    for (const reply of replies) expect(reply.status).toBe(404)
  })

  it("refuses connections once its scope has closed", async () => {
    const metrics = makeMetrics({ defaultMetrics: false })
    const port = await withServer(metrics, {}, async (endpoint) => {
      expect(await connectError(endpoint.port)).toBeUndefined()
      return endpoint.port
    })
    expect((await connectError(port))?.code).toBe("ECONNREFUSED")
  })

  it("closes promptly while a request is still in flight", async () => {
    const program = Effect.gen(function* () {
      const checking = yield* Deferred.make<void>()
      const scope = yield* Scope.make()
      const endpoint = yield* serveMetrics({
        health: Effect.andThen(Deferred.succeed(checking, undefined), Effect.never),
        healthTimeout: "1 hour",
      }).pipe(Scope.provide(scope))
      const pending = get(endpoint, "/healthz").then(
        () => "answered",
        () => "dropped",
      )
      yield* Deferred.await(checking)
      const closed = yield* Scope.close(scope, Exit.void).pipe(Effect.timeoutOption("2 seconds"))
      return { closed: closed._tag, request: yield* Effect.promise(() => pending) }
    })
    const result = await Effect.runPromise(
      program.pipe(Effect.provideService(Metrics, makeMetrics({ defaultMetrics: false }))),
    )
    expect(result).toEqual({ closed: "Some", request: "dropped" })
  })

  it("fails with MetricsServerError when the port is taken", async () => {
    const metrics = makeMetrics({ defaultMetrics: false })
    const exit = await withServer(metrics, {}, (endpoint) =>
      Effect.runPromiseExit(
        Effect.scoped(serveMetrics({ port: endpoint.port })).pipe(
          Effect.provideService(Metrics, metrics),
        ),
      ),
    )
    expect(exit).toEqual(Exit.fail(expect.any(MetricsServerError)))
    if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain("EADDRINUSE")
  })

  it("runs as a layer over MetricsLive", async () => {
    const program = Effect.gen(function* () {
      const endpoint = yield* MetricsServer
      const metrics = yield* Metrics
      metrics.gauge({ name: "t1_test_layer_up", help: "h" }).set(1)
      return yield* Effect.promise(() => get(endpoint, "/metrics"))
    })
    const layer = MetricsServerLive().pipe(Layer.provideMerge(MetricsLive))
    const reply = await Effect.runPromise(Effect.provide(program, layer))
    expect(reply.body).toMatch(/^t1_test_layer_up 1$/m)
  })
})
