import { existsSync, readFileSync } from "node:fs"
import { Effect, Layer } from "effect"
import { diagnosticActor } from "../../actors/diagnostic/index.ts"
import { trainerService } from "../../actors/trainer/index.ts"
import { runActor } from "../../services/actor/index.ts"
import { NatsBusLive, subjectsFor, withBusMetrics } from "../../services/bus/index.ts"
import {
  parseTokens,
  runGateway,
  type Tokens,
  TokensFileError,
} from "../../services/gateway/index.ts"
import { MetricsLive, serveMetrics } from "../../services/metrics/index.ts"
import { natsFlagSpec, natsFlagsHelp, natsOptionsFrom, prefixFrom } from "../bus-flags.ts"
import { intFlag, parseFlags, UsageError } from "../flags.ts"
import { logFlagSpec, logFlagsHelp, loggingLayer } from "../run-main.ts"

/** The gateway's own flags (everything but NATS and logging), as `t1 gateway` and `t1 serve` take them. */
export const gatewayServeFlagSpec = {
  listen: { type: "string" },
  "tokens-file": { type: "string" },
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  "shutdown-grace-ms": { type: "string" },
  "metrics-port": { type: "string" },
  "metrics-host": { type: "string" },
} as const

export const gatewayServeFlagsHelp = `  --listen HOST:PORT        address to serve on (T1_GATEWAY_LISTEN; default 127.0.0.1:50051;
                            [::1]:50051 for IPv6, port 0 = any free port)
  --tokens-file FILE        bearer tokens, one "TOKEN ROLE" per line, role admin or reader
                            (T1_GATEWAY_TOKENS_FILE); without it authentication is off
  --tls-cert FILE           serve TLS with this PEM certificate chain (T1_GATEWAY_TLS_CERT)
  --tls-key FILE            and this PEM private key (T1_GATEWAY_TLS_KEY)
  --shutdown-grace-ms MS    on SIGTERM, time running calls may take to finish (default 10000);
                            open WatchJob streams end at once with UNAVAILABLE
  --metrics-port PORT       serve /metrics and /healthz here (T1_METRICS_PORT; default 9465;
                            0 = any free port)
  --metrics-host HOST       address to bind (T1_METRICS_HOST; default 127.0.0.1)`

export const gatewayUsage = () => `Usage: t1 gateway [options]

Serves the public gRPC API, t1.v1.JobService (submit, get, list, watch, cancel), with
grpc.health.v1 and server reflection. Stateless: jobs live in NATS (KV bucket <prefix>-jobs,
events in the <PREFIX>_JOB_EVENTS stream), so any number of gateways can run side by side.

Options:
${gatewayServeFlagsHelp}
${natsFlagsHelp}
${logFlagsHelp}`

const spec = {
  ...natsFlagSpec,
  ...logFlagSpec,
  ...gatewayServeFlagSpec,
  help: { type: "boolean", short: "h" },
} as const

const env = (flag: string | undefined, name: string): string | undefined => {
  const v = flag ?? process.env[name]
  return v === undefined || v === "" ? undefined : v
}

/** `HOST:PORT` or `[IPv6]:PORT`. */
export const parseListen = (raw: string, usage: string): { host: string; port: number } => {
  const match = /^\[([^\]]+)\]:(\d+)$/.exec(raw) ?? /^([^:[\]\s]+):(\d+)$/.exec(raw)
  const port = Number(match?.[2])
  if (match?.[1] === undefined || !Number.isInteger(port) || port > 65_535) {
    throw new UsageError(
      `--listen must be HOST:PORT (port 0-65535), e.g. 127.0.0.1:50051, got ${JSON.stringify(raw)}`,
      usage,
    )
  }
  return { host: match[1], port }
}

const readTokens = (file: string, usage: string): Tokens => {
  let text: string
  try {
    text = readFileSync(file, "utf8")
  } catch (error) {
    throw new UsageError(
      `--tokens-file: cannot read ${file}: ${error instanceof Error ? error.message : error}`,
      usage,
    )
  }
  try {
    const tokens = parseTokens(text, file)
    if (tokens.size === 0) throw new UsageError(`--tokens-file: ${file} lists no tokens`, usage)
    return tokens
  } catch (error) {
    if (error instanceof TokensFileError) throw new UsageError(error.message, usage)
    throw error
  }
}

type GatewayServeFlagValues = {
  readonly [K in keyof typeof gatewayServeFlagSpec]?: string | undefined
}

export interface GatewayServeOptions {
  readonly host: string
  readonly port: number
  readonly tokens?: Tokens
  readonly tls?: { readonly certFile: string; readonly keyFile: string }
  readonly shutdownGraceMs: number
  readonly metricsHost: string
  readonly metricsPort: number
}

/** Validates the gateway's flags (and their environment variables); UsageError on a bad one. */
export const gatewayServeOptionsFrom = (
  values: GatewayServeFlagValues,
  usage: string,
): GatewayServeOptions => {
  const { host, port } = parseListen(
    env(values.listen, "T1_GATEWAY_LISTEN") ?? "127.0.0.1:50051",
    usage,
  )
  const tokensFile = env(values["tokens-file"], "T1_GATEWAY_TOKENS_FILE")
  const tokens = tokensFile === undefined ? undefined : readTokens(tokensFile, usage)
  const certFile = env(values["tls-cert"], "T1_GATEWAY_TLS_CERT")
  const keyFile = env(values["tls-key"], "T1_GATEWAY_TLS_KEY")
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new UsageError("--tls-cert and --tls-key go together", usage)
  }
  for (const [flag, file] of [
    ["tls-cert", certFile],
    ["tls-key", keyFile],
  ] as const) {
    if (file !== undefined && !existsSync(file)) {
      throw new UsageError(`--${flag}: ${file} does not exist`, usage)
    }
  }
  const tls = certFile === undefined || keyFile === undefined ? undefined : { certFile, keyFile }
  const shutdownGraceMs = intFlag("shutdown-grace-ms", values["shutdown-grace-ms"], 10_000, usage)
  const metricsPort = intFlag(
    "metrics-port",
    values["metrics-port"] ?? process.env.T1_METRICS_PORT,
    9465,
    usage,
  )
  if (metricsPort > 65_535) {
    throw new UsageError(`--metrics-port must be <= 65535, got ${metricsPort}`, usage)
  }
  const metricsHost = values["metrics-host"] ?? process.env.T1_METRICS_HOST ?? "127.0.0.1"
  return {
    host,
    port,
    shutdownGraceMs,
    metricsHost,
    metricsPort,
    ...(tokens === undefined ? {} : { tokens }),
    ...(tls === undefined ? {} : { tls }),
  }
}

export const gatewayCommand = (
  args: ReadonlyArray<string>,
): Effect.Effect<void, unknown> | string => {
  const usage = gatewayUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  if (positionals.length > 0) {
    throw new UsageError(`unexpected arguments: ${positionals.join(" ")}`, usage)
  }
  const { host, port, tokens, tls, shutdownGraceMs, metricsHost, metricsPort } =
    gatewayServeOptionsFrom(values, usage)
  const nats = natsOptionsFrom(values, usage, "t1-gateway")
  const subjects = subjectsFor(prefixFrom(values, usage))
  const logging = loggingLayer(values, usage)

  const program = Effect.gen(function* () {
    const endpoint = yield* serveMetrics({ host: metricsHost, port: metricsPort })
    yield* Effect.logInfo(`t1 gateway: metrics at ${endpoint.url}/metrics`)
    yield* Effect.forkScoped(runActor(diagnosticActor(subjects.ping, "gateway")))
    return yield* runGateway({
      subjects,
      host,
      port,
      shutdownGraceMs,
      services: [yield* trainerService({ subjects })],
      ...(tokens === undefined ? {} : { tokens }),
      ...(tls === undefined ? {} : { tls }),
    })
  })
  return program.pipe(
    Effect.scoped,
    Effect.provide(withBusMetrics(NatsBusLive(nats)).pipe(Layer.provideMerge(MetricsLive))),
    Effect.provide(logging),
  )
}
