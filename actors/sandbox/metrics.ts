import type { MetricsShape } from "../../services/metrics/index.ts"

export const sandboxMetrics = (metrics: MetricsShape) => ({
  sandboxes: metrics.gauge({
    name: "t1_sandbox_sandboxes",
    help: "Sandboxes on this host by state (warm, starting, leased)",
    labelNames: ["state"],
  }),
  createSeconds: metrics.histogram({
    name: "t1_sandbox_create_duration_seconds",
    help: "Time to hand out a sandbox, by source (warm pool or cold create)",
    labelNames: ["source"],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
  }),
  execSeconds: metrics.histogram({
    name: "t1_sandbox_exec_duration_seconds",
    help: "Time of one command in a sandbox shell, as the host saw it",
    buckets: [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600],
  }),
  timeouts: metrics.counter({
    name: "t1_sandbox_exec_timeouts_total",
    help: "Commands interrupted by their timeout",
  }),
  truncations: metrics.counter({
    name: "t1_sandbox_exec_truncations_total",
    help: "Commands whose output was cut to the cap",
  }),
  sessionRestarts: metrics.counter({
    name: "t1_sandbox_session_restarts_total",
    help: "Shell sessions that died or were killed and started again",
  }),
  reaped: metrics.counter({
    name: "t1_sandbox_reaped_total",
    help: "Sandboxes removed by the reaper or the idle timer, by reason (orphan, expired, idle)",
    labelNames: ["reason"],
  }),
  errors: metrics.counter({
    name: "t1_sandbox_errors_total",
    help: "Failed sandbox operations by class (infra, task) and error",
    labelNames: ["class", "error"],
  }),
})

export type SandboxMetrics = ReturnType<typeof sandboxMetrics>
