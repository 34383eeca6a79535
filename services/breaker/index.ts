export {
  BREAKER_STATE_VALUE,
  type BreakerOptions,
  type BreakerState,
  breakerOptionsProblem,
  CircuitBreaker,
  DEFAULT_BREAKER_OPTIONS,
} from "./breaker.ts"
export { type BreakerMetrics, breakerMetrics } from "./metrics.ts"
