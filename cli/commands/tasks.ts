import { Console, Effect } from "effect"
import { BUILD_NETWORKS } from "../../actors/sandbox/index.ts"
import {
  ContaminationFound,
  checkSplits,
  decontaminate,
  formatReport,
  readTaskSet,
} from "../../tasks/decontam/index.ts"
import { ALL_FAMILIES, DIFFICULTIES, synthesize } from "../../tasks/synth/index.ts"
import { choiceFlag, intFlag, parseFlags, UsageError } from "../flags.ts"
import { type CheckReport, checkTasks, TaskCheckFailed } from "../task-check.ts"

export const tasksUsage = () => `Usage: t1 tasks <families|synth|decontam|check> [options]

Synthetic task families, held-out splits and decontamination.

  t1 tasks families [--json]
      List the task families (name, tags, summary).

  t1 tasks synth --family F --seed S --count N --out DIR [--difficulty easy|medium|hard]
                 [--split train|eval] [--task-set NAME]
      Write N tasks of family F in the native layout (tasks/NATIVE.md) to DIR/<task id>/.
      Deterministic: the same family, seed, index and difficulty give byte-identical files.
      Without --difficulty, tasks rotate easy, medium, hard. --split defaults to train;
      --task-set to the name of DIR.

  t1 tasks decontam --train DIR[,DIR…] --eval DIR[,DIR…] [--n 8] [--threshold 0.5] [--json]
      Word n-gram overlap (lower case, digit runs as <num>) of each eval task's instruction,
      solution and tests against the whole train set, and a split check (no task in both sets;
      a family in both must use disjoint seed ranges). Exit 1 when an eval task overlaps more
      than the threshold or the split check fails. Reads any task format the loaders know.

  t1 tasks check DIR… [--driver docker|local|bwrap|auto] [--concurrency N] [--json] [--keep]
                 [--build-network none|default]
      Run each task's reference solution and a no-op agent in a sandbox: the reference must
      pass every test and the no-op must not. The reference runs as Harbor runs it: the task's
      solution/ folder is copied to /solution and \`bash /solution/solve.sh\` runs in the task's
      workdir (TB1: /solution/solution.sh). Prints a table, then for each task that is not ok
      the full error, the tests not passed, the verifier's notes, path and output tail.
      --json           one JSON object per task on stdout (JSON Lines, as each task finishes);
                       the table and the details go to stderr
      --keep           leave the sandboxes (docker; ttl 7 days) and print how to get in
      --build-network  the network of task image builds' RUN steps; default: the task's own
                       (allow_internet true: the engine's default network, else none)
      Exit 0 every task ok; 1 some task failed (reference not resolved, no-op resolved, an
      error); 3 none failed but some are unverifiable here (the tests need packages the
      sandbox lacks); 2 usage error.

Options:
  --json          print machine-readable output
  -h, --help      show this help`

const spec = {
  family: { type: "string" },
  seed: { type: "string" },
  count: { type: "string" },
  out: { type: "string" },
  difficulty: { type: "string" },
  split: { type: "string" },
  "task-set": { type: "string" },
  train: { type: "string" },
  eval: { type: "string" },
  n: { type: "string" },
  threshold: { type: "string" },
  driver: { type: "string" },
  concurrency: { type: "string" },
  keep: { type: "boolean" },
  "build-network": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const

type Values = ReturnType<typeof parseFlags<typeof spec>>["values"]

const ACTION_FLAGS: Record<string, ReadonlyArray<keyof typeof spec>> = {
  families: ["json"],
  synth: ["family", "seed", "count", "out", "difficulty", "split", "task-set", "json"],
  decontam: ["train", "eval", "n", "threshold", "json"],
  check: ["driver", "concurrency", "json", "keep", "build-network"],
}

const required = (
  values: Values,
  flag: "family" | "seed" | "count" | "out" | "train" | "eval",
  usage: string,
): string => {
  const value = values[flag]
  if (value === undefined || value === "") throw new UsageError(`--${flag} is required`, usage)
  return value
}

const list = (raw: string): ReadonlyArray<string> =>
  raw
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "")

const fractionFlag = (raw: string | undefined, fallback: number, usage: string): number => {
  if (raw === undefined) return fallback
  const value = Number(raw)
  if (raw.trim() === "" || !Number.isFinite(value) || value < 0 || value > 1)
    throw new UsageError(
      `--threshold must be a number between 0 and 1, got ${JSON.stringify(raw)}`,
      usage,
    )
  return value
}

const familiesList = (json: boolean): string =>
  json
    ? JSON.stringify(ALL_FAMILIES.map((f) => ({ name: f.name, tags: f.tags, summary: f.summary })))
    : ALL_FAMILIES.map(
        (f) => `${f.name.padEnd(18)} ${f.tags[0]?.padEnd(12) ?? ""} ${f.summary}`,
      ).join("\n")

const synthAction = (values: Values, usage: string) => {
  const family = required(values, "family", usage)
  if (!ALL_FAMILIES.some((f) => f.name === family))
    throw new UsageError(`unknown family ${JSON.stringify(family)}; see t1 tasks families`, usage)
  const seed = intFlag("seed", required(values, "seed", usage), 0, usage)
  const count = intFlag("count", required(values, "count", usage), 1, usage, 1)
  const out = required(values, "out", usage)
  const difficulty =
    values.difficulty === undefined
      ? undefined
      : choiceFlag("difficulty", values.difficulty, DIFFICULTIES, "medium", usage)
  const split = choiceFlag("split", values.split, ["train", "eval"], "train", usage)
  return synthesize({
    family,
    seed,
    count,
    out,
    difficulty,
    split,
    taskSet: values["task-set"],
  }).pipe(
    Effect.flatMap((tasks) =>
      Console.log(
        values.json === true
          ? JSON.stringify(
              tasks.map((t) => ({
                id: t.meta.id,
                dir: t.dir,
                expected_tests: t.generated.expectedTests,
              })),
            )
          : [
              ...tasks.map((t) => `${t.dir}  (${t.generated.expectedTests} tests)`),
              `wrote ${tasks.length} ${family} task(s)`,
            ].join("\n"),
      ),
    ),
  )
}

const decontamAction = (values: Values, usage: string) => {
  const train = list(required(values, "train", usage))
  const evalDirs = list(required(values, "eval", usage))
  const n = intFlag("n", values.n, 8, usage, 1)
  const threshold = fractionFlag(values.threshold, 0.5, usage)
  return Effect.gen(function* () {
    const trainTasks = yield* readTaskSet(train)
    const evalTasks = yield* readTaskSet(evalDirs)
    const report = decontaminate(trainTasks, evalTasks, { n, threshold })
    const split = checkSplits(trainTasks, evalTasks)
    yield* Console.log(
      values.json === true
        ? JSON.stringify({ ...report, split })
        : [
            formatReport(report),
            `split check: ${split.heldOutFamilies.length} held-out families, ${split.sharedFamilies.length} shared, ${split.violations.length === 0 ? "no violations" : `violations:\n  ${split.violations.join("\n  ")}`}`,
          ].join("\n"),
    )
    if (!report.passed || split.violations.length > 0)
      return yield* new ContaminationFound({
        max: report.max,
        threshold,
        flagged: report.flagged,
        violations: split.violations,
      })
  })
}

export const tasksCommand = (
  args: ReadonlyArray<string>,
): Effect.Effect<void, unknown> | string => {
  const usage = tasksUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  const [action, ...rest] = positionals
  if (action === undefined)
    throw new UsageError("which action? families, synth, decontam or check", usage)
  const allowed = ACTION_FLAGS[action]
  if (allowed === undefined)
    throw new UsageError(
      `unknown action ${JSON.stringify(action)}: families, synth, decontam or check`,
      usage,
    )
  for (const flag of Object.keys(values) as Array<keyof typeof spec>)
    if (flag !== "help" && values[flag] !== undefined && !allowed.includes(flag))
      throw new UsageError(`--${flag} is not an option of t1 tasks ${action}`, usage)
  if (action !== "check" && rest.length > 0)
    throw new UsageError(`unexpected arguments: ${rest.join(" ")}`, usage)

  if (action === "families") return familiesList(values.json === true)
  if (action === "synth") return synthAction(values, usage)
  if (action === "decontam") return decontamAction(values, usage)
  if (rest.length === 0) throw new UsageError("which tasks? name one or more directories", usage)
  const driver = choiceFlag(
    "driver",
    values.driver,
    ["docker", "local", "bwrap", "auto"],
    "auto",
    usage,
  )
  const concurrency = intFlag("concurrency", values.concurrency, 2, usage, 1)
  const keep = values.keep === true
  if (keep && (driver === "local" || driver === "bwrap"))
    throw new UsageError(`--keep needs the docker driver: ${driver} sandboxes end with t1`, usage)
  const buildNetwork =
    values["build-network"] === undefined
      ? undefined
      : choiceFlag("build-network", values["build-network"], BUILD_NETWORKS, "none", usage)
  return checkTasks(rest, {
    driver,
    concurrency,
    json: values.json === true,
    keep,
    buildNetwork,
  }).pipe(Effect.flatMap(finishCheck))
}

/**
 * The check's exit status: a failure (exit 1, one line on stderr) when any task failed; exit 3
 * with a line on stderr when none failed but some are unverifiable here; else success.
 */
export const finishCheck = (report: CheckReport): Effect.Effect<void, TaskCheckFailed> => {
  // A forged task failed the check too (its evidence is in the details above).
  const named = (status: "failed" | "unverifiable") =>
    report.rows
      .filter((r) => r.status === status || (status === "failed" && r.status === "forged"))
      .map((r) => r.task)
  if (report.exitCode === 1)
    return Effect.fail(
      new TaskCheckFailed({ failed: named("failed"), unverifiable: named("unverifiable") }),
    )
  if (report.exitCode === 3) {
    const unverifiable = named("unverifiable")
    return Console.error(
      `t1: no task failed, but ${unverifiable.length} cannot be verified here (exit 3): ${unverifiable.join(", ")}`,
    ).pipe(
      Effect.andThen(
        Effect.sync(() => {
          process.exitCode = 3
        }),
      ),
    )
  }
  return Effect.void
}
