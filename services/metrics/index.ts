/**
 * Prometheus metrics for one process: a `Metrics` service over a prom-client registry with
 * get-or-create counters, gauges and histograms named `t1_<component>_<thing>_<unit>`, and a
 * scoped HTTP server for `/metrics` and `/healthz`.
 */
export { InvalidMetricName, MetricConflict, MetricsServerError } from "./errors.ts"
export type { HistogramSpec, MakeMetricsOptions, MetricSpec, MetricsShape } from "./metrics.ts"
export { Metrics, MetricsLive, makeMetrics } from "./metrics.ts"
export type { MetricKind } from "./names.ts"
export { validateMetricName } from "./names.ts"
export type { MetricsEndpoint, MetricsServerOptions } from "./server.ts"
export { MetricsServer, MetricsServerLive, serveMetrics } from "./server.ts"
