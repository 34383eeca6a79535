/**
 * A circuit breaker for one member of a pool (a sandbox host's engine, an inference-engine
 * replica): after `failures` consecutive infrastructure failures, each within `windowMs` of the
 * one before, it opens and the member takes no work for `cooldownMs`; then it lets one probe
 * through (half-open): a success closes it, a failure opens it again for another cool-down.
 *
 * Pure state with the time passed in, so that callers read their own clock (Effect's Clock, so
 * TestClock drives it in tests) and tests need no sleeps.
 */

export interface BreakerOptions {
  /** Consecutive infra failures that open the breaker (≥ 1). */
  readonly failures: number
  /** A failure more than this long after the previous one starts the count again. */
  readonly windowMs: number
  /** How long an open breaker refuses work before it lets a probe through. */
  readonly cooldownMs: number
}

export const DEFAULT_BREAKER_OPTIONS: BreakerOptions = {
  failures: 5,
  windowMs: 60_000,
  cooldownMs: 30_000,
}

export type BreakerState = "closed" | "open" | "half_open"

/** The gauge value of each state (t1_breaker_state). */
export const BREAKER_STATE_VALUE: Record<BreakerState, number> = {
  closed: 0,
  open: 1,
  half_open: 2,
}

/** Refuses options a breaker cannot honour; the message names the option. */
export const breakerOptionsProblem = (o: BreakerOptions): string | undefined => {
  if (!Number.isInteger(o.failures) || o.failures < 1)
    return `failures must be an integer >= 1, got ${o.failures}`
  if (!Number.isFinite(o.windowMs) || o.windowMs <= 0)
    return `window must be > 0 ms, got ${o.windowMs}`
  if (!Number.isFinite(o.cooldownMs) || o.cooldownMs <= 0)
    return `cool-down must be > 0 ms, got ${o.cooldownMs}`
  return undefined
}

export class CircuitBreaker {
  private consecutive = 0
  private lastFailureMs = Number.NEGATIVE_INFINITY
  private openedAtMs: number | undefined
  private probing = false
  private opens = 0

  constructor(readonly options: BreakerOptions = DEFAULT_BREAKER_OPTIONS) {
    const problem = breakerOptionsProblem(options)
    if (problem !== undefined) throw new RangeError(`circuit breaker: ${problem}`)
  }

  /** The state at `nowMs`: an open breaker is half-open once its cool-down has passed. */
  state(nowMs: number): BreakerState {
    if (this.openedAtMs === undefined) return "closed"
    return nowMs - this.openedAtMs >= this.options.cooldownMs ? "half_open" : "open"
  }

  /**
   * Whether the member may take a request now. Half-open lets one probe through at a time: the
   * caller must report its outcome (success or failure) before another is allowed.
   */
  tryAcquire(nowMs: number): boolean {
    const s = this.state(nowMs)
    if (s === "closed") return true
    if (s === "open" || this.probing) return false
    this.probing = true
    return true
  }

  /** When an open breaker lets its probe through (undefined when closed). */
  reopensAtMs(): number | undefined {
    return this.openedAtMs === undefined ? undefined : this.openedAtMs + this.options.cooldownMs
  }

  /** Times the breaker has opened (re-opening after a failed probe included). */
  openCount(): number {
    return this.opens
  }

  /** Records a success; true when it closed an open (or half-open) breaker. */
  success(): boolean {
    const wasOpen = this.openedAtMs !== undefined
    this.consecutive = 0
    this.openedAtMs = undefined
    this.probing = false
    return wasOpen
  }

  /** Records an infra failure; true when this failure opened (or re-opened) the breaker. */
  failure(nowMs: number): boolean {
    const s = this.state(nowMs)
    if (s === "open") return false
    if (s === "half_open") {
      // The probe failed: another full cool-down.
      this.probing = false
      this.openedAtMs = nowMs
      this.opens++
      return true
    }
    if (nowMs - this.lastFailureMs > this.options.windowMs) this.consecutive = 0
    this.lastFailureMs = nowMs
    this.consecutive++
    if (this.consecutive < this.options.failures) return false
    this.consecutive = 0
    this.openedAtMs = nowMs
    this.opens++
    return true
  }

  /** A request let through while half-open ended without telling success from failure. */
  release(): void {
    this.probing = false
  }
}
