import { Effect, Layer } from "effect"
import { ActorConfigError, actorRegistry, diagnosticActor } from "../../actors/index.ts"
import { runActor } from "../../services/actor/index.ts"
import { NatsBusLive, subjectsFor, withBusMetrics } from "../../services/bus/index.ts"
import { MetricsLive, serveMetrics } from "../../services/metrics/index.ts"
import { natsFlagSpec, natsFlagsHelp, natsOptionsFrom, prefixFrom } from "../bus-flags.ts"
import { intFlag, parseFlags, UsageError } from "../flags.ts"
import { logFlagSpec, logFlagsHelp, loggingLayer } from "../run-main.ts"

const actorList = () =>
  Object.entries(actorRegistry)
    .map(([name, a]) => `  ${name.padEnd(14)} ${a.summary}`)
    .join("\n")

export const actorUsage = (name?: string) => `Usage: t1 actor <name> [options]

Runs one actor in this process against a NATS cluster. Start more processes to scale out.

Actors:
${actorList()}

Options:
  --concurrency N           messages handled at once (default 1)
  --shutdown-grace-ms MS    on SIGTERM, time in-flight work may take to finish (default 30000)
  --metrics-port PORT       serve /metrics and /healthz here (T1_METRICS_PORT; default 9464; 0 = any free port)
  --metrics-host HOST       address to bind (T1_METRICS_HOST; default 127.0.0.1)
${natsFlagsHelp}
${logFlagsHelp}${name !== undefined && actorRegistry[name]?.flagsHelp !== undefined ? `\n${name} options:\n${actorRegistry[name]?.flagsHelp}` : ""}`

const spec = {
  ...natsFlagSpec,
  ...logFlagSpec,
  concurrency: { type: "string" },
  "shutdown-grace-ms": { type: "string" },
  "metrics-port": { type: "string" },
  "metrics-host": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const

export const actorCommand = (
  args: ReadonlyArray<string>,
): Effect.Effect<void, unknown> | string => {
  // The actor's name comes first, so that its own flags are known before parsing the rest.
  const named = args[0] !== undefined && !args[0].startsWith("-") ? args[0] : undefined
  const usage = actorUsage(named)
  const actor = named === undefined ? undefined : actorRegistry[named]
  if (named !== undefined && actor === undefined) {
    throw new UsageError(`unknown actor ${JSON.stringify(named)}`, usage)
  }
  const { values, positionals } = parseFlags(args, { ...spec, ...(actor?.flags ?? {}) }, usage)
  if (values.help === true) return usage
  const [name, ...extra] = positionals
  if (name === undefined || actor === undefined) {
    throw new UsageError("which actor? name one first: t1 actor <name> [options]", usage)
  }
  if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(" ")}`, usage)
  const concurrency = intFlag("concurrency", values.concurrency, 1, usage, 1)
  const shutdownGraceMs = intFlag("shutdown-grace-ms", values["shutdown-grace-ms"], 30_000, usage)
  const port = intFlag(
    "metrics-port",
    values["metrics-port"] ?? process.env.T1_METRICS_PORT,
    9464,
    usage,
  )
  if (port > 65_535) throw new UsageError(`--metrics-port must be <= 65535, got ${port}`, usage)
  const host = values["metrics-host"] ?? process.env.T1_METRICS_HOST ?? "127.0.0.1"
  const nats = natsOptionsFrom(values, usage, `t1-${name}`)
  const subjects = subjectsFor(prefixFrom(values, usage))
  const logging = loggingLayer(values, usage)

  let program: ReturnType<typeof actor.run>
  try {
    program = actor.run({ subjects, concurrency, shutdownGraceMs }, values)
  } catch (error) {
    if (error instanceof ActorConfigError) throw new UsageError(error.message, usage)
    throw error
  }
  const hosted = Effect.gen(function* () {
    const endpoint = yield* serveMetrics({ host, port })
    yield* Effect.logInfo(`t1 actor ${name}: metrics at ${endpoint.url}/metrics`)
    if (name !== "diagnostic") {
      yield* Effect.forkScoped(runActor(diagnosticActor(subjects.ping, name)))
    }
    return yield* program
  })
  return hosted.pipe(
    Effect.scoped,
    Effect.provide(withBusMetrics(NatsBusLive(nats)).pipe(Layer.provideMerge(MetricsLive))),
    Effect.provide(logging),
  )
}
