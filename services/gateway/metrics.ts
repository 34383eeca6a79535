import * as grpc from "@grpc/grpc-js"
import type { MetricsShape } from "../metrics/index.ts"

const DURATION_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800,
]

/** The gateway's metrics; `method` is `<Service>/<Method>`, e.g. `JobService/SubmitJob`. */
export const gatewayMetrics = (metrics: MetricsShape) => {
  const requests = metrics.counter({
    name: "t1_gateway_requests_total",
    help: "gRPC calls answered by the gateway, by method and status code",
    labelNames: ["method", "code"],
  })
  const duration = metrics.histogram({
    name: "t1_gateway_request_duration_seconds",
    help: "Time from a call's arrival to its status (streams: their whole life), by method",
    labelNames: ["method"],
    buckets: DURATION_BUCKETS,
  })
  const watchStreams = metrics.gauge({
    name: "t1_gateway_watch_streams",
    help: "WatchJob streams open now",
  })
  return {
    watchStreams,
    /** Records one finished call. */
    observe: (method: string, code: grpc.status, startedMs: number): void => {
      requests.inc({ method, code: grpc.status[code] ?? String(code) })
      duration.observe({ method }, (performance.now() - startedMs) / 1000)
    },
  }
}

export type GatewayMetrics = ReturnType<typeof gatewayMetrics>
