import type { MetricsShape } from "../../services/metrics/index.ts"

/** Why a trajectory (or an attempt's records) left the buffer without being trained on. */
export type DropReason =
  | "duplicate_attempt"
  | "expired"
  | "corrupt"
  | "malformed"
  | "stale"
  | "zero_variance"

/** The buffer's Prometheus metrics; every series carries the job. */
export const bufferMetrics = (m: MetricsShape) => ({
  trajectoriesIn: m.counter({
    name: "t1_buffer_trajectories_in_total",
    help: "Trajectories assembled and stored durably (infra-failed and unverifiable ones included)",
    labelNames: ["job"],
  }),
  trajectoriesOut: m.counter({
    name: "t1_buffer_trajectories_out_total",
    help: "Trajectories served in batches (a re-served one counts again)",
    labelNames: ["job"],
  }),
  dropped: m.counter({
    name: "t1_buffer_dropped_total",
    help: "Trajectories or attempts dropped, by reason (duplicate_attempt, expired, corrupt, malformed, stale, zero_variance)",
    labelNames: ["job", "reason"],
  }),
  infraFailed: m.counter({
    name: "t1_buffer_infra_failed_total",
    help: "Infra-failed episodes stored but excluded from batches and reward statistics",
    labelNames: ["job"],
  }),
  unverifiable: m.counter({
    name: "t1_buffer_unverifiable_total",
    help: "Unverifiable episodes (their tests need packages the sandbox lacks) stored but excluded from batches and reward statistics",
    labelNames: ["job"],
  }),
  batches: m.counter({
    name: "t1_buffer_batches_total",
    help: "Batches by event: served, confirmed (acked by the learner), expired (re-served later)",
    labelNames: ["job", "event"],
  }),
  staleness: m.histogram({
    name: "t1_buffer_staleness",
    help: "Policy-version lag of served trajectories (policy_version − admitted_policy_version)",
    labelNames: ["job"],
    buckets: [0, 1, 2, 3, 4, 6, 8, 12, 16, 32],
  }),
  reward: m.histogram({
    name: "t1_buffer_reward",
    help: "Reward of stored trajectories (infra-failed and unverifiable excluded)",
    labelNames: ["job"],
    buckets: [0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50],
  }),
  bytesHeld: m.gauge({
    name: "t1_buffer_bytes_held",
    help: "Bytes held in memory: incomplete trajectories plus ready, not yet served ones",
    labelNames: ["job"],
  }),
  ready: m.gauge({
    name: "t1_buffer_ready",
    help: "Trajectories ready to serve (stored, not in an unconfirmed batch)",
    labelNames: ["job"],
  }),
  assembling: m.gauge({
    name: "t1_buffer_assembling",
    help: "Episode attempts whose trajectory is still incomplete",
    labelNames: ["job"],
  }),
  unconfirmed: m.gauge({
    name: "t1_buffer_unconfirmed",
    help: "Trajectories served in batches the learner has not confirmed yet",
    labelNames: ["job"],
  }),
})

export type BufferMetrics = ReturnType<typeof bufferMetrics>
