import { makeRng } from "../synth/rng.ts"
import type { TaskTexts } from "./read.ts"

/**
 * Train/eval splits that are disjoint by construction, two ways at once:
 * - family-held-out: some families appear only in eval (chosen by a seeded shuffle);
 * - seed-held-out: a family used by both splits draws its train seeds from [0, 1e6) and its
 *   eval seeds from [1e6, 2e6), so no task can be generated for both.
 * `checkSplits` verifies both properties on task sets read from disk.
 */
export const SEED_RANGES = {
  train: { from: 0, to: 1_000_000 },
  eval: { from: 1_000_000, to: 2_000_000 },
} as const
export type Split = keyof typeof SEED_RANGES

export interface FamilySplit {
  readonly trainFamilies: ReadonlyArray<string>
  /** Families held out: they appear in eval only. */
  readonly heldOutFamilies: ReadonlyArray<string>
}

export const splitFamilies = (
  families: ReadonlyArray<string>,
  options: { readonly seed: number; readonly heldOut: number },
): FamilySplit => {
  if (options.heldOut < 1 || options.heldOut >= families.length)
    throw new RangeError(
      `hold out between 1 and ${families.length - 1} families, not ${options.heldOut}`,
    )
  const shuffled = makeRng(`t1-split/${options.seed}`).shuffle([...families].sort())
  return {
    heldOutFamilies: shuffled.slice(0, options.heldOut).sort(),
    trainFamilies: shuffled.slice(options.heldOut).sort(),
  }
}

/** The k-th seed of a split's range: deterministic, and never in the other split's range. */
export const splitSeed = (split: Split, k: number): number => {
  const range = SEED_RANGES[split]
  if (!Number.isInteger(k) || k < 0 || range.from + k >= range.to)
    throw new RangeError(`seed index ${k} is outside the ${split} range`)
  return range.from + k
}

export const seedSplit = (seed: number): Split | undefined =>
  seed >= SEED_RANGES.train.from && seed < SEED_RANGES.train.to
    ? "train"
    : seed >= SEED_RANGES.eval.from && seed < SEED_RANGES.eval.to
      ? "eval"
      : undefined

export interface SplitCheck {
  /** Families with eval tasks and no train task. */
  readonly heldOutFamilies: ReadonlyArray<string>
  /** Families in both sets (then their seeds must be held out). */
  readonly sharedFamilies: ReadonlyArray<string>
  /** Empty when the split is disjoint. */
  readonly violations: ReadonlyArray<string>
}

/**
 * Verifies disjointness of synthesised task sets: no task id in both, and for every family in
 * both sets, train tasks use train-range seeds and eval tasks eval-range seeds.
 */
export const checkSplits = (
  train: ReadonlyArray<TaskTexts>,
  evalTasks: ReadonlyArray<TaskTexts>,
): SplitCheck => {
  const violations: Array<string> = []
  const trainIds = new Set(train.map((t) => t.id))
  for (const t of evalTasks) if (trainIds.has(t.id)) violations.push(`${t.id} is in both sets`)
  // Tasks that name no family (hand-written sets) are covered by the id and n-gram checks only.
  const trainFamilies = new Set(train.map((t) => t.family).filter((f) => f !== ""))
  const evalFamilies = new Set(evalTasks.map((t) => t.family).filter((f) => f !== ""))
  const shared = [...evalFamilies].filter((f) => trainFamilies.has(f)).sort()
  for (const family of shared) {
    for (const t of train.filter((x) => x.family === family))
      if (t.seed === undefined || seedSplit(t.seed) !== "train")
        violations.push(
          `${t.id}: family ${family} is in both sets, but this train task's seed is not in the train range`,
        )
    for (const t of evalTasks.filter((x) => x.family === family))
      if (t.seed === undefined || seedSplit(t.seed) !== "eval")
        violations.push(
          `${t.id}: family ${family} is in both sets, but this eval task's seed is not in the eval range`,
        )
  }
  return {
    heldOutFamilies: [...evalFamilies].filter((f) => !trainFamilies.has(f)).sort(),
    sharedFamilies: shared,
    violations,
  }
}
