import type { MetricsShape } from "../metrics/index.ts"

export const actorMetrics = (metrics: MetricsShape) => ({
  messages: metrics.counter({
    name: "t1_actor_messages_total",
    help: "Messages an actor took, by actor and outcome (ok|failed|malformed|interrupted)",
    labelNames: ["actor", "outcome"],
  }),
  seconds: metrics.histogram({
    name: "t1_actor_handle_duration_seconds",
    help: "Time an actor's handler took per message",
    labelNames: ["actor"],
    buckets: [0.001, 0.005, 0.025, 0.1, 0.5, 1, 5, 30, 120, 600, 3600],
  }),
  inFlight: metrics.gauge({
    name: "t1_actor_in_flight_messages",
    help: "Messages an actor is handling right now",
    labelNames: ["actor"],
  }),
  restarts: metrics.counter({
    name: "t1_actor_restarts_total",
    help: "Times an actor's mailbox failed and was restarted by its supervisor",
    labelNames: ["actor"],
  }),
})
