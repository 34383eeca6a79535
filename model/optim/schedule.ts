import { OptimizerError } from "./errors.ts"

/**
 * Linear warm-up to `peakLr`, then either constant or a half-cosine down to `minLr` at
 * `totalSteps` (and `minLr` after it).
 */
export type LrScheduleOptions = {
  readonly peakLr: number
  /** Steps of linear warm-up (0 for none). */
  readonly warmupSteps: number
} & (
  | { readonly after: "constant" }
  | {
      readonly after: "cosine"
      /** The step at which the cosine reaches minLr (counting warm-up). */
      readonly totalSteps: number
      /** Default 0. */
      readonly minLr?: number
    }
)

function fail(subject: string, reason: string): never {
  throw new OptimizerError({ subject, reason })
}

const nonNegative = (x: number): boolean => Number.isFinite(x) && x >= 0

/**
 * The learning rate for each step, as a function of the number of optimizer steps already taken
 * (0 for the first update, i.e. `AdamW.stepCount` before calling `step`):
 *
 *   step < warmupSteps:   peakLr · (step + 1) / warmupSteps   (the first update is not wasted at 0)
 *   constant afterwards:  peakLr
 *   cosine afterwards:    minLr + (peakLr − minLr) · ½(1 + cos(π · min(1, (step − warmupSteps) / (totalSteps − warmupSteps))))
 *
 * The options are checked once, here (OptimizerError); the returned function throws for a step
 * that is not a non-negative integer.
 */
export function lrSchedule(options: LrScheduleOptions): (step: number) => number {
  const { peakLr, warmupSteps } = options
  if (!nonNegative(peakLr)) fail("peakLr", `must be a finite number ≥ 0, got ${peakLr}`)
  if (!Number.isSafeInteger(warmupSteps) || warmupSteps < 0) {
    fail("warmupSteps", `must be a non-negative integer, got ${warmupSteps}`)
  }
  const kind: string = options.after
  let after: (step: number) => number = () => peakLr
  if (options.after === "cosine") {
    const { totalSteps } = options
    const minLr = options.minLr ?? 0
    if (!Number.isSafeInteger(totalSteps) || totalSteps < warmupSteps) {
      fail("totalSteps", `must be an integer ≥ warmupSteps (${warmupSteps}), got ${totalSteps}`)
    }
    if (!(nonNegative(minLr) && minLr <= peakLr)) {
      fail("minLr", `must be in [0, peakLr = ${peakLr}], got ${minLr}`)
    }
    const span = totalSteps - warmupSteps
    after = (step) => {
      const progress = span === 0 ? 1 : Math.min(1, (step - warmupSteps) / span)
      return minLr + (peakLr - minLr) * 0.5 * (1 + Math.cos(Math.PI * progress))
    }
  } else if (kind !== "constant") {
    fail("after", `must be "constant" or "cosine", got ${JSON.stringify(kind)}`)
  }
  return (step) => {
    if (!Number.isSafeInteger(step) || step < 0) {
      fail("step", `must be a non-negative integer, got ${step}`)
    }
    return step < warmupSteps ? (peakLr * (step + 1)) / warmupSteps : after(step)
  }
}
