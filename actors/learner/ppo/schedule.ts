/** Learning-rate schedule and minibatch order of the PPO update. */
import { Rng } from "../../../model/rng.ts"
import { fail, requireCount } from "./errors.ts"

export type LrScheduleKind = "constant" | "cosine"

export interface LrSchedule {
  readonly kind: LrScheduleKind
  /** Linear warm-up over the first this many updates (0 = none). */
  readonly warmupSteps: number
  /** Cosine: the update count at which the floor is reached (0 = no decay). */
  readonly decaySteps: number
  /** Cosine: the floor, as a fraction of the base rate, in [0, 1]. */
  readonly minRatio: number
}

/**
 * The factor on the base learning rate at update `u` (0-based):
 *
 *   u < W:                          (u + 1) / W                     (linear warm-up)
 *   constant, or cosine with D = 0: 1
 *   cosine:                         m + (1 − m) · ½ · (1 + cos(π · p)),  p = min(1, (u − W) / (D − W))
 *
 * with W the warm-up steps, D the decay steps and m the floor (p = 1 when D ≤ W).
 */
export const lrFactor = (u: number, s: LrSchedule): number => {
  requireCount("update", u)
  requireCount("warmupSteps", s.warmupSteps)
  requireCount("decaySteps", s.decaySteps)
  if (!(s.minRatio >= 0 && s.minRatio <= 1))
    fail("minRatio", `must be in [0, 1], got ${s.minRatio}`)
  if (u < s.warmupSteps) return (u + 1) / s.warmupSteps
  if (s.kind === "constant" || s.decaySteps === 0) return 1
  const span = s.decaySteps - s.warmupSteps
  const p = span <= 0 ? 1 : Math.min(1, (u - s.warmupSteps) / span)
  return s.minRatio + (1 - s.minRatio) * 0.5 * (1 + Math.cos(Math.PI * p))
}

/** A 32-bit seed mixed from several integers (splitmix32 finaliser on each). */
export const mixSeed = (...parts: ReadonlyArray<number>): number => {
  let h = 0x9e3779b9
  for (const p of parts) {
    let z = (h ^ (p >>> 0)) >>> 0
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0
    h = (z ^ (z >>> 16)) >>> 0
  }
  return h
}

/**
 * The minibatches of one epoch: the indices 0..n−1 shuffled (Fisher–Yates from `seed`) and cut
 * into min(minibatches, n) consecutive parts whose sizes differ by at most one. Every index is
 * in exactly one part; the same seed gives the same parts.
 */
export const minibatchOrder = (n: number, minibatches: number, seed: number): number[][] => {
  requireCount("n", n)
  if (!(Number.isSafeInteger(minibatches) && minibatches >= 1))
    fail("minibatches", `must be a positive integer, got ${minibatches}`)
  const order = Array.from({ length: n }, (_, i) => i)
  const rng = new Rng(seed)
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1))
    const t = order[i] as number
    order[i] = order[j] as number
    order[j] = t
  }
  const parts = Math.min(minibatches, n)
  const out: number[][] = []
  let start = 0
  for (let p = 0; p < parts; p++) {
    const size = Math.floor(n / parts) + (p < n % parts ? 1 : 0)
    out.push(order.slice(start, start + size))
    start += size
  }
  return out
}
