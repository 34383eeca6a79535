/**
 * The ablation table of `exp:learn --ablate`: one row per recipe variant, each over the same
 * seeds, with the gain and its interval computed as the main figures compute them. Kept apart
 * from the experiment so that rows and skips are tested on given per-seed scores.
 */
import { mean, stratifiedPairedInterval } from "./stats.ts"

/** What one seed run of an arm contributes to its row. */
export interface ArmSeed {
  readonly seed: number
  /** Held-out resolved rate before and after RL. */
  readonly before: number
  readonly after: number
  /** Each held-out task's after − before resolved rate (the paired interval's data). */
  readonly taskGains: ReadonlyArray<number>
  readonly steps: number
  /** The learner's train/inference |Δ log p| of each update that trained (skipped ones measure nothing). */
  readonly logprobDiffs: ReadonlyArray<number>
}

export interface AblationRow {
  readonly variant: string
  readonly seeds: number
  readonly resolved_before: number
  readonly resolved_after: number
  readonly gain: number
  readonly gain_ci95: [number, number]
  /** Mean over the arm's trained updates, all seeds pooled; null when none trained. */
  readonly logprob_diff: number | null
  /** RL updates done, mean over seeds. */
  readonly steps: number
}

export interface AblationSkip {
  readonly variant: string
  readonly reason: string
}

/** What running a variant came to: its seeds, or why it was left out. */
export type VariantOutcome =
  | { readonly variant: string; readonly seeds: ReadonlyArray<ArmSeed> }
  | AblationSkip

/** The pooled mean of the updates' mismatch, null when no update trained. */
export const meanLogprobDiff = (seeds: ReadonlyArray<ArmSeed>): number | null => {
  const diffs = seeds.flatMap((s) => s.logprobDiffs)
  return diffs.length === 0 ? null : mean(diffs)
}

export const ablationRow = (variant: string, seeds: ReadonlyArray<ArmSeed>): AblationRow => {
  if (seeds.length === 0) throw new Error(`ablation variant ${variant} has no seed run`)
  return {
    variant,
    seeds: seeds.length,
    resolved_before: mean(seeds.map((s) => s.before)),
    resolved_after: mean(seeds.map((s) => s.after)),
    gain: mean(seeds.map((s) => s.after - s.before)),
    gain_ci95: stratifiedPairedInterval(seeds.map((s) => s.taskGains)),
    logprob_diff: meanLogprobDiff(seeds),
    steps: mean(seeds.map((s) => s.steps)),
  }
}

/**
 * The default arm first (the main run's seeds), then each variant that ran; a variant that could
 * not run is listed with its reason and never given a row (a row of zeros would read as a result).
 */
export const ablationTable = (
  defaultArm: { readonly variant: string; readonly seeds: ReadonlyArray<ArmSeed> },
  outcomes: ReadonlyArray<VariantOutcome>,
): { ablation: AblationRow[]; ablation_skipped: AblationSkip[] } => {
  const ablation = [ablationRow(defaultArm.variant, defaultArm.seeds)]
  const ablation_skipped: AblationSkip[] = []
  for (const o of outcomes)
    if ("reason" in o) ablation_skipped.push({ variant: o.variant, reason: o.reason })
    else ablation.push(ablationRow(o.variant, o.seeds))
  return { ablation, ablation_skipped }
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`

export const ablationMarkdown = (
  rows: ReadonlyArray<AblationRow>,
  skipped: ReadonlyArray<AblationSkip>,
): string => {
  const lines = [
    "| variant | seeds | before | after | gain | 95% interval | logprob diff | RL updates |",
    "|---|--:|--:|--:|--:|--:|--:|--:|",
    ...rows.map(
      (r) =>
        `| ${r.variant} | ${r.seeds} | ${pct(r.resolved_before)} | ${pct(r.resolved_after)} | ${pct(r.gain)} | ${pct(r.gain_ci95[0])}–${pct(r.gain_ci95[1])} | ${r.logprob_diff === null ? "–" : r.logprob_diff.toExponential(2)} | ${r.steps.toFixed(1)} |`,
    ),
  ]
  if (skipped.length > 0)
    lines.push("", ...skipped.map((s) => `not run: ${s.variant}: ${s.reason}`))
  return lines.join("\n")
}
