/**
 * Load test: many concurrent episodes through one sandbox host, and many concurrent WatchJob
 * streams on one gateway, then a leak check. Needs a Docker engine with t1-base:latest and
 * nats-server (a private one is started unless --nats is given).
 *
 *   npx tsx test/load/main.ts [--episodes N] [--watches N] [--turns N] [--events N] [--json]
 *
 * Prints a table of figures on stdout (progress on stderr); with --json the last stdout line is
 * one JSON object of the figures. Exits 1 when an episode or a watch fails, a phase does not
 * finish, or anything leaks; 2 on a usage error.
 */
import { parseArgs } from "node:util"
import { type LoadFigures, runLoad } from "./load.ts"
import { Teardown } from "./teardown.ts"

const USAGE = `usage: npx tsx test/load/main.ts [--episodes N] [--watches N] [--turns N] [--events N]
                              [--nats URL] [--json]

  --episodes N   concurrent episodes of the scripted policy (default 64)
  --watches N    concurrent WatchJob streams on one gateway (default 1000)
  --turns N      command turns per episode, before its completion turn (default 5)
  --events N     job events appended while the watches are open (default 20)
  --nats URL     use this NATS server (default: a private nats-server)
  --json         also print one JSON object of the figures as the last line
  -h, --help     this text`

const FLAGS = {
  episodes: { type: "string" },
  watches: { type: "string" },
  turns: { type: "string" },
  events: { type: "string" },
  nats: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const

class UsageError extends Error {}

const integer = (name: string, value: string | undefined, fallback: number, min: number) => {
  if (value === undefined) return fallback
  const n = Number(value)
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min)
    throw new UsageError(`--${name} must be an integer >= ${min}, got '${value}'`)
  return n
}

const parse = (argv: ReadonlyArray<string>) => {
  try {
    const { values } = parseArgs({ args: [...argv], options: FLAGS, strict: true })
    return {
      help: values.help === true,
      json: values.json === true,
      episodes: integer("episodes", values.episodes, 64, 1),
      watches: integer("watches", values.watches, 1000, 1),
      turns: integer("turns", values.turns, 5, 1),
      events: integer("events", values.events, 20, 1),
      ...(values.nats === undefined ? {} : { natsUrl: values.nats }),
    }
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e))
  }
}

/** Figures as rows, leaks flattened to `leaks.<what>`. */
const rows = (figures: LoadFigures): Array<[string, string]> =>
  Object.entries(figures).flatMap(
    ([key, value]): Array<[string, string]> =>
      typeof value === "number"
        ? [[key, Number.isNaN(value) ? "–" : String(value)]]
        : Object.entries(value).map(([leak, n]) => [`leaks.${leak}`, String(n)]),
  )

const table = (figures: LoadFigures): string => {
  const all: Array<[string, string]> = [["figure", "value"], ...rows(figures)]
  const width = Math.max(...all.map(([name]) => name.length))
  const valueWidth = Math.max(...all.map(([, value]) => value.length))
  return all
    .map(([name, value]) => `${name.padEnd(width)}  ${value.padStart(valueWidth)}`)
    .join("\n")
}

const main = async (): Promise<number> => {
  let options: ReturnType<typeof parse>
  try {
    options = parse(process.argv.slice(2))
  } catch (e) {
    if (!(e instanceof UsageError)) throw e
    process.stderr.write(`${e.message}\n${USAGE}\n`)
    return 2
  }
  if (options.help) {
    process.stdout.write(`${USAGE}\n`)
    return 0
  }
  const started = Date.now()
  const log = (line: string) =>
    process.stderr.write(`[load +${((Date.now() - started) / 1000).toFixed(1)}s] ${line}\n`)
  const teardown = new Teardown(log)
  // Interrupted: stop the processes and remove the containers, then leave.
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping everything`)
      void teardown.run().finally(() => process.exit(signal === "SIGINT" ? 130 : 143))
    })
  }
  const report = await runLoad({ ...options, log, teardown })
  process.stdout.write(`${table(report.figures)}\n`)
  for (const problem of report.problems) process.stderr.write(`problem: ${problem}\n`)
  if (options.json) process.stdout.write(`${JSON.stringify(report.figures)}\n`)
  return report.problems.length === 0 ? 0 : 1
}

main().then(
  (code) => {
    process.exitCode = code
  },
  (e: unknown) => {
    process.stderr.write(
      `load test failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
    )
    process.exitCode = 1
  },
)
