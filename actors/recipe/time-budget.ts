/**
 * A time budget for the RL phase of a recipe run: asked before each update whether one more
 * still leaves room for what must follow it (the evaluations after RL, the control arm). The
 * next update is taken to last as long as the longest of the last few, so a run whose updates
 * grow slower (longer episodes as the policy changes) stops in time rather than overrun.
 */
export class RlTimeBudget {
  private readonly ends: number[]

  constructor(
    /** When the whole run must be done (ms since the epoch). */
    readonly deadlineMs: number,
    /** What must still fit after the last update. */
    readonly reserveMs: number,
    /** When RL started. */
    startMs: number,
    /** Updates whose durations bound the next one's. */
    readonly window = 5,
  ) {
    this.ends = [startMs]
  }

  /** An update ended at `nowMs`. */
  stepEnded(nowMs: number): void {
    this.ends.push(nowMs)
    if (this.ends.length > this.window + 1) this.ends.shift()
  }

  /** The next update's estimate: the longest of the last `window` (0 before any ended). */
  get nextStepMs(): number {
    let longest = 0
    for (let i = 1; i < this.ends.length; i++)
      longest = Math.max(longest, (this.ends[i] as number) - (this.ends[i - 1] as number))
    return longest
  }

  /** One more update, then the reserve, ends by the deadline. */
  fits(nowMs: number): boolean {
    return nowMs + this.nextStepMs + this.reserveMs <= this.deadlineMs
  }
}
