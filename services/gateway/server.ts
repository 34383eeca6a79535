import { readFileSync } from "node:fs"
import type { DescFile } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { type Duration, Effect, type Scope } from "effect"
import { file_t1_v1_job, JobService } from "../../proto/index.ts"
import { Bus, type BusError, type Subjects } from "../bus/index.ts"
import { jobStoreFor } from "../jobs/index.ts"
import { Metrics } from "../metrics/index.ts"
import type { Tokens } from "./auth.ts"
import { type CallRunner, makeCallRunner } from "./calls.ts"
import { GatewayStartError } from "./errors.ts"
import { file_grpc_health_v1_health } from "./gen/grpc/health/v1/health_pb.ts"
import { serviceDefinition } from "./grpc-adapter.ts"
import { Health, healthHandlers, servingStatus } from "./health.ts"
import { type GatewayMetrics, gatewayMetrics } from "./metrics.ts"
import {
  reflectionHandlers,
  reflectionIndex,
  reflectionV1,
  reflectionV1alpha,
} from "./reflection.ts"
import { jobServiceHandlers } from "./service.ts"

/** Certificate and key, PEM: as files, or as bytes (tests). */
export interface GatewayTls {
  readonly certFile?: string
  readonly keyFile?: string
  readonly cert?: Uint8Array
  readonly key?: Uint8Array
}

export interface GatewayOptions {
  readonly subjects: Subjects
  /** Default 127.0.0.1. */
  readonly host?: string
  /** Default 50051; 0 picks a free port (read it from the endpoint). */
  readonly port?: number
  /** Bearer tokens and their roles; absent or empty turns authentication off. */
  readonly tokens?: Tokens
  /** Serve TLS instead of plaintext. */
  readonly tls?: GatewayTls
  /** On shutdown, how long running calls may take to finish; default 10 s. */
  readonly shutdownGraceMs?: number
  /** How often the job store is probed for the health service; default 5 s. */
  readonly healthCheckEvery?: Duration.Input
  /**
   * More services on the same server, behind the same auth, TLS, health and reflection (the
   * external trainers' t1.v1.TrainerService, built by the layer that owns its machinery).
   */
  readonly services?: ReadonlyArray<GatewayService>
}

/** What a service added to the gateway gets to build its handlers with. */
export interface GatewayContext {
  readonly runner: CallRunner
  readonly metrics: GatewayMetrics
  readonly tokens: Tokens | undefined
}

export interface GatewayService {
  /** Its full name, for health and reflection. */
  readonly typeName: string
  /** The file that declares it, for reflection. */
  readonly file: DescFile
  readonly install: (server: grpc.Server, context: GatewayContext) => void
}

export interface GatewayEndpoint {
  readonly host: string
  readonly port: number
  /** `host:port`, as a client dials it. */
  readonly address: string
  readonly tls: boolean
}

/** Every service the gateway serves, as server reflection lists them. */
export const GATEWAY_SERVICES = [
  JobService.typeName,
  Health.typeName,
  reflectionV1.ServerReflection.typeName,
  reflectionV1alpha.ServerReflection.typeName,
]

const hostPort = (host: string, port: number) =>
  host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`

const isLoopback = (host: string) =>
  host === "localhost" || host === "::1" || host.startsWith("127.")

const credentialsFor = (tls: GatewayTls | undefined) =>
  Effect.try({
    try: () => {
      if (tls === undefined) return grpc.ServerCredentials.createInsecure()
      const read = (bytes: Uint8Array | undefined, file: string | undefined, what: string) => {
        if (bytes !== undefined) return Buffer.from(bytes)
        if (file === undefined) throw new Error(`TLS needs a ${what}`)
        return readFileSync(file)
      }
      return grpc.ServerCredentials.createSsl(
        null,
        [
          {
            cert_chain: read(tls.cert, tls.certFile, "certificate"),
            private_key: read(tls.key, tls.keyFile, "key"),
          },
        ],
        false,
      )
    },
    catch: (cause) =>
      new GatewayStartError({
        reason: `TLS: ${cause instanceof Error ? cause.message : String(cause)}`,
      }),
  })

const bind = (server: grpc.Server, address: string, credentials: grpc.ServerCredentials) =>
  Effect.callback<number, GatewayStartError>((resume) => {
    server.bindAsync(address, credentials, (error, port) => {
      if (error === null) resume(Effect.succeed(port))
      else {
        server.forceShutdown()
        resume(
          Effect.fail(new GatewayStartError({ reason: `listen on ${address}: ${error.message}` })),
        )
      }
    })
  })

/**
 * Serves t1.v1.JobService, grpc.health.v1.Health and server reflection (v1, v1alpha) until the
 * scope closes. Closing it is a graceful shutdown: health turns NOT_SERVING, no new calls are
 * accepted, open streams end with UNAVAILABLE (a WatchJob client resumes elsewhere with
 * from_seq), unary calls get `shutdownGraceMs` to finish, then whatever is left is cut off.
 */
export const serveGateway = (
  options: GatewayOptions,
): Effect.Effect<GatewayEndpoint, GatewayStartError | BusError, Bus | Metrics | Scope.Scope> =>
  Effect.gen(function* () {
    const bus = yield* Bus
    const metrics = gatewayMetrics(yield* Metrics)
    const host = options.host ?? "127.0.0.1"
    const tokens = options.tokens
    const credentials = yield* credentialsFor(options.tls)
    const store = yield* jobStoreFor(bus, options.subjects)
    const serving = yield* servingStatus(
      // A read of an id no job has: answered by the KV bucket, or not at all when NATS is down.
      store.find("health-probe"),
      options.healthCheckEvery ?? "5 seconds",
      "3 seconds",
    )
    const runner = yield* makeCallRunner(metrics)

    const server = new grpc.Server({
      // Long WatchJob streams: notice clients that vanished without closing.
      "grpc.keepalive_time_ms": 60_000,
      "grpc.keepalive_timeout_ms": 20_000,
    })
    server.addService(
      serviceDefinition(JobService),
      jobServiceHandlers({ bus, subjects: options.subjects, store, runner, metrics, tokens }),
    )
    const extra = options.services ?? []
    for (const service of extra) service.install(server, { runner, metrics, tokens })
    server.addService(
      serviceDefinition(Health),
      healthHandlers(runner, serving.status, [
        JobService.typeName,
        ...extra.map((x) => x.typeName),
      ]),
    )
    const reflection = reflectionHandlers(
      runner,
      reflectionIndex(
        [
          file_t1_v1_job,
          ...extra.map((x) => x.file),
          file_grpc_health_v1_health,
          reflectionV1.file_grpc_reflection_v1_reflection,
          reflectionV1alpha.file_grpc_reflection_v1alpha_reflection,
        ],
        [...GATEWAY_SERVICES, ...extra.map((x) => x.typeName)],
      ),
    )
    server.addService(serviceDefinition(reflectionV1.ServerReflection), reflection.v1)
    server.addService(serviceDefinition(reflectionV1alpha.ServerReflection), reflection.v1alpha)

    const graceMs = options.shutdownGraceMs ?? 10_000
    const shutdown = Effect.gen(function* () {
      yield* serving.stop
      // Stop taking calls first, then end the streams, which would otherwise never finish.
      const drained = new Promise<void>((resolve) => server.tryShutdown(() => resolve()))
      yield* runner.endStreams
      const finished = yield* Effect.promise(() => drained).pipe(Effect.timeoutOption(graceMs))
      if (finished._tag === "None") {
        yield* Effect.logWarning(
          `gateway: calls still running after ${graceMs} ms of shutdown, cutting them off`,
        )
        server.forceShutdown()
      }
      yield* Effect.logInfo("gateway: stopped")
    })
    const requested = hostPort(host, options.port ?? 50051)
    const port = yield* Effect.acquireRelease(bind(server, requested, credentials), () => shutdown)

    const endpoint: GatewayEndpoint = {
      host,
      port,
      address: hostPort(host, port),
      tls: options.tls !== undefined,
    }
    if (tokens === undefined || tokens.size === 0) {
      yield* Effect.logWarning(
        "gateway: no tokens configured, authentication is OFF: any client may submit and cancel jobs",
      )
    } else if (options.tls === undefined && !isLoopback(host)) {
      yield* Effect.logWarning(
        `gateway: bearer tokens cross the network in clear text (listening on ${host} without TLS)`,
      )
    }
    yield* Effect.logInfo(
      `gateway: serving ${[...GATEWAY_SERVICES, ...extra.map((x) => x.typeName)].join(", ")} on ${endpoint.address}${endpoint.tls ? " (TLS)" : ""}`,
    )
    return endpoint
  })

/** The gateway as a program: serves until interrupted (SIGINT/SIGTERM), then shuts down. */
export const runGateway = (
  options: GatewayOptions,
): Effect.Effect<never, GatewayStartError | BusError, Bus | Metrics> =>
  Effect.scoped(Effect.andThen(serveGateway(options), Effect.never))
