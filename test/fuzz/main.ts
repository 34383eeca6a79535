/**
 * Fuzzes every decoder, loader and parser that reads bytes or text from outside the process:
 * protobuf on every bus subject, trajectory records, packed arrays, weights, chunked blobs, task
 * directories, action parsers and job specs. Each target runs a fixed number of cases from a
 * seeded generator, so a run is deterministic and any crash can be replayed on its own.
 *
 *   npx tsx test/fuzz/main.ts [--iterations N] [--seed S] [--target NAME] [--case I] [--json]
 *
 * A case is accepted, rejected with a typed error (an Effect tagged error with a message), or a
 * crash: an untyped exception (TypeError, RangeError…), a defect, or a hang. Exits 1 on any
 * crash, after printing each crash's target, case, seed and input (hex) on stderr.
 */
import { parseArgs } from "node:util"
import { type CrashReport, runTarget, type TargetReport } from "./harness.ts"
import { TARGETS } from "./targets/index.ts"

const USAGE = `usage: npx tsx test/fuzz/main.ts [--iterations N] [--seed S] [--target NAME] [--case I]
                               [--json] [--list]

  --iterations N   cases per target (default 2000)
  --seed S         run seed, a non-negative integer (default 1); same seed, same cases
  --target NAME    only the target named NAME, or those whose name contains NAME
                   (repeatable)
  --case I         only case I of each selected target (replays a reported crash)
  --timeout-ms MS  a case taking longer is a hang (default 5000)
  --json           also print one JSON object as the last line of output
  --list           list the targets and exit
  -h, --help       this text`

class UsageError extends Error {}

const FLAGS = {
  iterations: { type: "string" },
  seed: { type: "string" },
  target: { type: "string", multiple: true },
  case: { type: "string" },
  "timeout-ms": { type: "string" },
  json: { type: "boolean" },
  list: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const

const integer = (
  name: string,
  value: string | undefined,
  fallback: number,
  min: number,
): number => {
  if (value === undefined) return fallback
  const n = Number(value)
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min)
    throw new UsageError(`--${name} must be an integer >= ${min}, got '${value}'`)
  return n
}

const parse = (argv: ReadonlyArray<string>) => {
  let values: ReturnType<typeof parseArgs<{ options: typeof FLAGS }>>["values"]
  try {
    values = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: FLAGS,
    }).values
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e))
  }
  const filters = values.target ?? []
  // A filter that names a target exactly selects that one only (replays name one target).
  const matches = (name: string, f: string) =>
    name === f || (!TARGETS.some((t) => t.name === f) && name.includes(f))
  const targets = TARGETS.filter(
    (t) => filters.length === 0 || filters.some((f) => matches(t.name, f)),
  )
  if (targets.length === 0) throw new UsageError(`no target matches ${filters.join(", ")}`)
  return {
    help: values.help === true,
    list: values.list === true,
    json: values.json === true,
    iterations: integer("iterations", values.iterations, 2000, 1),
    seed: integer("seed", values.seed, 1, 0),
    only: values.case === undefined ? undefined : integer("case", values.case, 0, 0),
    timeoutMs: integer("timeout-ms", values["timeout-ms"], 5000, 1),
    targets,
  }
}

const table = (reports: ReadonlyArray<TargetReport>): string => {
  const rows = [
    ["target", "iterations", "accepted", "rejected", "crashes", "seconds"],
    ...reports.map((r) => [
      r.name,
      String(r.iterations),
      String(r.accepted),
      String(r.rejected),
      String(r.crashes),
      r.seconds.toFixed(2),
    ]),
  ]
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? "").length))) ?? []
  return rows
    .map((row) =>
      row
        .map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0)))
        .join("  "),
    )
    .join("\n")
}

const crashText = (c: CrashReport, seed: number): string =>
  [
    `CRASH ${c.target} case ${c.index} (case seed ${c.seed}): ${c.reason}`,
    `  replay: npx tsx test/fuzz/main.ts --seed ${seed} --target '${c.target}' --case ${c.index}`,
    `  input: ${c.input.length > 4096 ? `${c.input.slice(0, 4096)}… (${c.input.length} chars)` : c.input}`,
  ].join("\n")

const main = async (): Promise<number> => {
  let options: ReturnType<typeof parse>
  try {
    options = parse(process.argv.slice(2))
  } catch (e) {
    if (!(e instanceof UsageError)) throw e
    console.error(`${e.message}\n${USAGE}`)
    return 2
  }
  if (options.help) {
    console.log(USAGE)
    return 0
  }
  if (options.list) {
    for (const t of options.targets) console.log(`${t.name}\t${t.description}`)
    return 0
  }
  const started = performance.now()
  const reports: TargetReport[] = []
  for (const target of options.targets) {
    const report = await runTarget(target, {
      iterations: options.iterations,
      seed: options.seed,
      caseTimeoutMs: options.timeoutMs,
      ...(options.only === undefined ? {} : { only: options.only }),
    })
    reports.push(report)
    for (const c of report.examples) console.error(crashText(c, options.seed))
  }
  const seconds = (performance.now() - started) / 1000
  const crashes = reports.reduce((n, r) => n + r.crashes, 0)
  const iterations = reports.reduce((n, r) => n + r.iterations, 0)
  console.log(table(reports))
  console.log(
    `${reports.length} targets, ${iterations} cases, ${crashes} crashes in ${seconds.toFixed(1)} s (seed ${options.seed})`,
  )
  if (options.json) {
    console.log(
      JSON.stringify({
        targets: reports.map(({ name, iterations, accepted, rejected, crashes }) => ({
          name,
          iterations,
          accepted,
          rejected,
          crashes,
        })),
        iterations,
        crashes,
        seconds: Number(seconds.toFixed(2)),
      }),
    )
  }
  return crashes === 0 ? 0 : 1
}

process.exitCode = await main()
