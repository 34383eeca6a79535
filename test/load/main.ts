/**
 * Load test: many concurrent episodes through one sandbox host, and many concurrent WatchJob
 * streams on one gateway, then a leak check. Needs a Docker engine with t1-base:latest and
 * nats-server (a private one is started unless --nats is given); --driver bwrap also bubblewrap.
 *
 *   npx tsx test/load/main.ts [--driver docker|bwrap | --drivers docker,bwrap] [--episodes N]
 *                             [--watches N] [--turns N] [--events N] [--json]
 *
 * Prints a table of figures on stdout (progress on stderr); with --json the last stdout line is
 * one JSON object of the figures (with --drivers: each driver's, one run after the other, and
 * bwrap_vs_docker_episodes_per_s). Exits 1 when an episode or a watch fails, a phase does not
 * finish, or anything leaks; 2 on a usage error.
 */
import { parseArgs } from "node:util"
import { LOAD_DRIVERS, type LoadDriver, type LoadFigures, runLoad } from "./load.ts"
import { Teardown } from "./teardown.ts"

const USAGE = `usage: npx tsx test/load/main.ts [--driver docker|bwrap | --drivers docker,bwrap]
                              [--episodes N] [--watches N] [--turns N] [--events N]
                              [--nats URL] [--json]

  --driver D     the sandbox host's driver: docker (default) or bwrap
  --drivers LIST the whole run once per driver, one after the other, and the ratio of their
                 episodes/s (bwrap_vs_docker_episodes_per_s when both are listed)
  --episodes N   concurrent episodes of the scripted policy (default 64)
  --watches N    concurrent WatchJob streams on one gateway (default 1000)
  --turns N      command turns per episode, before its completion turn (default 5)
  --events N     job events appended while the watches are open (default 20)
  --nats URL     use this NATS server (default: a private nats-server)
  --json         also print one JSON object of the figures as the last line
  -h, --help     this text`

const FLAGS = {
  driver: { type: "string" },
  drivers: { type: "string" },
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

const driverOf = (name: string, value: string): LoadDriver => {
  const hit = LOAD_DRIVERS.find((d) => d === value)
  if (hit === undefined)
    throw new UsageError(`--${name} must be ${LOAD_DRIVERS.join(" or ")}, got '${value}'`)
  return hit
}

const driversOf = (values: { driver?: string; drivers?: string }): ReadonlyArray<LoadDriver> => {
  if (values.driver !== undefined && values.drivers !== undefined)
    throw new UsageError("give --driver or --drivers, not both")
  if (values.drivers === undefined) return [driverOf("driver", values.driver ?? "docker")]
  const list = values.drivers.split(",").map((d) => driverOf("drivers", d.trim()))
  if (new Set(list).size !== list.length)
    throw new UsageError(`--drivers names a driver twice: '${values.drivers}'`)
  return list
}

const parse = (argv: ReadonlyArray<string>) => {
  try {
    const { values } = parseArgs({ args: [...argv], options: FLAGS, strict: true })
    return {
      drivers: driversOf(values),
      multi: values.drivers !== undefined,
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
  let teardown = new Teardown(log)
  // Interrupted: stop the processes and remove the sandboxes, then leave.
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping everything`)
      void teardown.run().finally(() => process.exit(signal === "SIGINT" ? 130 : 143))
    })
  }
  const figures: Partial<Record<LoadDriver, LoadFigures>> = {}
  let failed = false
  for (const driver of options.drivers) {
    teardown = new Teardown(log)
    log(`driver ${driver}`)
    const report = await runLoad({ ...options, driver, log, teardown })
    figures[driver] = report.figures
    process.stdout.write(`driver ${driver}\n${table(report.figures)}\n`)
    for (const problem of report.problems) process.stderr.write(`problem (${driver}): ${problem}\n`)
    failed ||= report.problems.length > 0
  }
  const docker = figures.docker?.episodes_per_s
  const bwrap = figures.bwrap?.episodes_per_s
  const ratio =
    docker === undefined || bwrap === undefined
      ? undefined
      : Math.round((bwrap / docker) * 100) / 100
  if (ratio !== undefined) process.stdout.write(`bwrap_vs_docker_episodes_per_s  ${ratio}\n`)
  if (options.json) {
    const [only] = options.drivers
    const out =
      options.multi || only === undefined
        ? { ...figures, ...(ratio === undefined ? {} : { bwrap_vs_docker_episodes_per_s: ratio }) }
        : { driver: only, ...figures[only] }
    process.stdout.write(`${JSON.stringify(out)}\n`)
  }
  return failed ? 1 : 0
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
