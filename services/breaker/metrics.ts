import type { MetricsShape } from "../metrics/index.ts"
import { BREAKER_STATE_VALUE, type BreakerState } from "./breaker.ts"

/** The breakers of a process: one label set per (component, member). */
export const breakerMetrics = (metrics: MetricsShape) => {
  const state = metrics.gauge({
    name: "t1_breaker_state",
    help: "Circuit breaker of a pool member (component: sandbox_host or engine; member: its owner id or URL): 0 closed, 1 open (taking no work), 2 half-open (one probe)",
    labelNames: ["component", "member"],
  })
  const opens = metrics.counter({
    name: "t1_breaker_opens_total",
    help: "Times a member's circuit breaker opened after consecutive infra failures (a failed half-open probe included)",
    labelNames: ["component", "member"],
  })
  return {
    set: (component: string, member: string, s: BreakerState) =>
      state.set({ component, member }, BREAKER_STATE_VALUE[s]),
    opened: (component: string, member: string) => {
      opens.inc({ component, member })
      state.set({ component, member }, BREAKER_STATE_VALUE.open)
    },
  }
}

export type BreakerMetrics = ReturnType<typeof breakerMetrics>
