import type { MetricsShape } from "../../services/metrics/index.ts"

export type FinishedResult = "resolved" | "unresolved" | "failed" | "unverifiable"

export const coordinatorMetrics = (m: MetricsShape) => ({
  jobs: m.gauge({
    name: "t1_coordinator_jobs",
    help: "Jobs in the job store by state (pending, running, cancelling, succeeded, failed, cancelled), as this coordinator sees them",
    labelNames: ["state"],
  }),
  admitted: m.counter({
    name: "t1_coordinator_episodes_admitted_total",
    help: "New episodes admitted (work items published; re-issued attempts not counted)",
  }),
  finished: m.counter({
    name: "t1_coordinator_episodes_finished_total",
    help: "Episodes that reached their final outcome, by result (resolved, unresolved, failed after the last attempt, unverifiable: tests need packages the sandbox lacks)",
    labelNames: ["result"],
  }),
  retried: m.counter({
    name: "t1_coordinator_episodes_retried_total",
    help: "Episodes re-issued as a new attempt after an infra failure",
  }),
})

export type CoordinatorMetrics = ReturnType<typeof coordinatorMetrics>
