import type { IncomingMessage, Server, ServerResponse } from "node:http"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import type { Duration, Scope } from "effect"
import { Context, Effect, FiberSet, Layer } from "effect"
import { MetricsServerError } from "./errors.ts"
import type { HealthVerdict } from "./health.ts"
import { judgeHealth } from "./health.ts"
import { Metrics } from "./metrics.ts"

export interface MetricsServerOptions<R = never> {
  /** Default 127.0.0.1; bind 0.0.0.0 only where Prometheus scrapes from another host. */
  readonly host?: string
  /** Default 0: a free port chosen by the OS, read back from {@link MetricsEndpoint.port}. */
  readonly port?: number
  /** `/healthz` answers 503 with the reason when this fails, dies or returns false. */
  readonly health?: Effect.Effect<boolean, unknown, R>
  /** How long `/healthz` waits for `health`; default 5 seconds. */
  readonly healthTimeout?: Duration.Input
}

export interface MetricsEndpoint {
  readonly host: string
  readonly port: number
  readonly url: string
}

/** The endpoint of this process's running metrics server. */
export class MetricsServer extends Context.Service<MetricsServer, MetricsEndpoint>()(
  "t1/MetricsServer",
) {}

const send = (res: ServerResponse, status: number, contentType: string, body: string) => {
  // A scope closing mid-request destroys the socket; there is nobody left to answer.
  if (res.destroyed || res.writableEnded) return
  res.writeHead(status, { "content-type": contentType }).end(body)
}

const TEXT = "text/plain; charset=utf-8"

const urlOf = (host: string, port: number) =>
  `http://${host.includes(":") ? `[${host}]` : host}:${port}`

/**
 * Serves `GET /metrics` and `GET /healthz` until the scope closes. Closing also drops open
 * connections (keep-alive scrapers hold them) so shutdown does not wait on a client.
 */
export const serveMetrics = <R = never>(
  options: MetricsServerOptions<R> = {},
): Effect.Effect<MetricsEndpoint, MetricsServerError, Metrics | Scope.Scope | R> =>
  Effect.gen(function* () {
    const { registry } = yield* Metrics
    const host = options.host ?? "127.0.0.1"
    const requestedPort = options.port ?? 0
    // Health checks run as fibers of this scope, so closing it interrupts any still running.
    const runPromise = yield* FiberSet.makeRuntimePromise<R>()
    const health: Effect.Effect<HealthVerdict, never, R> = options.health
      ? judgeHealth(options.health, options.healthTimeout ?? "5 seconds")
      : Effect.succeed({ healthy: true })

    const respond = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
      const path = new URL(req.url ?? "/", "http://metrics").pathname
      if (req.method === "GET" && path === "/metrics") {
        return send(res, 200, registry.contentType, await registry.metrics())
      }
      if (req.method === "GET" && path === "/healthz") {
        const verdict = await runPromise(health)
        return verdict.healthy ? send(res, 200, TEXT, "ok") : send(res, 503, TEXT, verdict.reason)
      }
      send(res, 404, TEXT, "not found")
    }

    const handle = (req: IncomingMessage, res: ServerResponse) => {
      respond(req, res).catch((error: unknown) =>
        send(res, 500, TEXT, error instanceof Error ? error.message : String(error)),
      )
    }

    const listen = Effect.callback<Server, MetricsServerError>((resume) => {
      const server = createServer(handle)
      let listening = false
      server.on("error", (cause) => {
        if (!listening) {
          resume(Effect.fail(new MetricsServerError({ host, port: requestedPort, cause })))
        } else {
          void runPromise(Effect.logWarning("metrics server error", cause))
        }
      })
      server.listen(requestedPort, host, () => {
        listening = true
        resume(Effect.succeed(server))
      })
    })

    const close = (server: Server) =>
      Effect.callback<void>((resume) => {
        server.close(() => resume(Effect.void))
        server.closeAllConnections()
      })

    const server = yield* Effect.acquireRelease(listen, close)
    // Listening on a TCP host:port, so address() is an AddressInfo, not a pipe name or null.
    const { port } = server.address() as AddressInfo
    return { host, port, url: urlOf(host, port) }
  })

/** {@link serveMetrics} as a layer: the server lives as long as the layer's scope. */
export const MetricsServerLive = <R = never>(
  options: MetricsServerOptions<R> = {},
): Layer.Layer<MetricsServer, MetricsServerError, Metrics | R> =>
  Layer.effect(MetricsServer, Effect.map(serveMetrics(options), MetricsServer.of))
