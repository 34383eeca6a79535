/**
 * Writes the task ladder to a directory (until `t1 tasks` has a ladder action):
 *
 *   npx tsx tasks/ladder/main.ts --out DIR [--seed 0] [--train-per-family 20]
 *     [--demos-per-family 0] [--eval-per-family 5] [--ood-per-family N] [--rungs 1,2,3] [--difficulty easy|medium|hard]
 *     [--ood a,b,c] [--json]
 *
 * DIR/ladder-train, DIR/ladder-eval and DIR/ladder-ood hold native tasks; then e.g.
 * `t1 tasks decontam --train DIR/ladder-train --eval DIR/ladder-eval,DIR/ladder-ood`.
 */
import { parseArgs } from "node:util"
import { Effect } from "effect"
import { DIFFICULTIES, type Difficulty } from "../synth/index.ts"
import { LADDER_SETS, type LadderSet, parseRungs, RUNGS, writeLadder } from "./index.ts"

const USAGE =
  "usage: tsx tasks/ladder/main.ts --out DIR [--seed S] [--train-per-family N] [--demos-per-family N] [--eval-per-family N] [--ood-per-family N] [--rungs 1,2,3] [--difficulty D] [--ood F,F] [--json]"

const int = (name: string, value: string | undefined, fallback: number): number => {
  if (value === undefined) return fallback
  const n = Number(value)
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`--${name} must be a whole number >= 0\n${USAGE}`)
  return n
}

const main = async () => {
  const { values } = parseArgs({
    options: {
      out: { type: "string" },
      seed: { type: "string" },
      "train-per-family": { type: "string" },
      "eval-per-family": { type: "string" },
      "demos-per-family": { type: "string" },
      "ood-per-family": { type: "string" },
      rungs: { type: "string" },
      difficulty: { type: "string" },
      ood: { type: "string" },
      json: { type: "boolean" },
    },
  })
  if (values.out === undefined) throw new Error(USAGE)
  const rungs = (() => {
    if (values.rungs === undefined) return undefined
    try {
      return parseRungs(values.rungs)
    } catch (e) {
      throw new Error(`${e instanceof Error ? e.message : String(e)}\n${USAGE}`)
    }
  })()
  const difficulty = values.difficulty
  if (difficulty !== undefined && !DIFFICULTIES.some((d) => d === difficulty))
    throw new Error(`--difficulty must be one of ${DIFFICULTIES.join(", ")}`)
  const evalPerFamily = int("eval-per-family", values["eval-per-family"], 5)
  const written = await Effect.runPromise(
    writeLadder(values.out, {
      seed: int("seed", values.seed, 0),
      trainPerFamily: int("train-per-family", values["train-per-family"], 20),
      demosPerFamily: int("demos-per-family", values["demos-per-family"], 0),
      evalPerFamily,
      oodPerFamily: int("ood-per-family", values["ood-per-family"], evalPerFamily),
      ...(rungs === undefined ? {} : { rungs }),
      ...(difficulty === undefined ? {} : { difficulty: difficulty as Difficulty }),
      ...(values.ood === undefined ? {} : { oodFamilies: values.ood.split(",") }),
    }),
  )
  const counts = Object.fromEntries(
    LADDER_SETS.map((set: LadderSet) => [
      set,
      Object.fromEntries(
        RUNGS.map((r) => [r, written.splits[set].filter((t) => t.rung === r).length]).filter(
          ([, n]) => n !== 0,
        ),
      ),
    ]),
  )
  const summary = {
    dirs: written.dirs,
    tasks: counts,
    families: written.splits.families,
    decontam: {
      max: written.check.report.max,
      mean: written.check.report.mean,
      threshold: written.check.report.threshold,
      passed: written.check.report.passed,
      violations: written.check.split.violations,
    },
  }
  console.log(
    values.json === true
      ? JSON.stringify(summary)
      : [
          ...LADDER_SETS.map(
            (set) =>
              `${written.dirs[set]}: ${written.splits[set].length} tasks (by rung ${JSON.stringify(counts[set])})`,
          ),
          `held-out families: ${written.splits.families.ood.join(", ")}`,
          `decontamination: max ${(summary.decontam.max * 100).toFixed(1)}%, mean ${(summary.decontam.mean * 100).toFixed(1)}% (threshold ${(summary.decontam.threshold * 100).toFixed(0)}%), no split violations`,
        ].join("\n"),
  )
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : String(error))
  process.exit(1)
})
