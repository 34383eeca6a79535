/**
 * What the job commands (`t1 submit`, `watch`, `jobs`, `cancel`, `eval`) share: the flags that
 * say which gateway to call and how, a client per command run, and the one-paragraph report of a
 * failed call (gRPC code name, message, the `t1-field-path` trailer, a hint).
 */
import { readFileSync } from "node:fs"
import * as grpc from "@grpc/grpc-js"
import { Data, Effect } from "effect"
import {
  GatewayCallError,
  type JobServiceClient,
  type JobServiceClientOptions,
  jobServiceClientScoped,
} from "../services/gateway/index.ts"
import { intFlag, UsageError } from "./flags.ts"

export const gatewayFlagSpec = {
  gateway: { type: "string" },
  token: { type: "string" },
  "tls-ca": { type: "string" },
  tls: { type: "boolean" },
  "tls-server-name": { type: "string" },
  "timeout-ms": { type: "string" },
} as const

export const gatewayFlagsHelp = `Gateway options (each also read from the environment variable shown):
  --gateway HOST:PORT        the t1 gateway (T1_GATEWAY; default 127.0.0.1:50051)
  --token SECRET             bearer token (T1_TOKEN; prefer the variable)
  --tls-ca FILE              TLS, verifying the gateway against this PEM CA bundle
                             (T1_GATEWAY_TLS_CA); plaintext without it or --tls
  --tls                      TLS, verifying the gateway against the system's roots
  --tls-server-name NAME     name in the gateway's certificate, when it is not the host
                             (T1_GATEWAY_TLS_SERVER_NAME)
  --timeout-ms MS            deadline of each unary call (default 30000); WatchJob has none`

type GatewayFlagValues = {
  readonly [K in keyof typeof gatewayFlagSpec]?: (typeof gatewayFlagSpec)[K]["type"] extends "boolean"
    ? boolean | undefined
    : string | undefined
}

/** Where to call and how. */
export interface GatewayTarget {
  readonly address: string
  readonly options: JobServiceClientOptions
}

const pick = (flag: string | undefined, env: string): string | undefined => {
  const v = flag ?? process.env[env]
  return v === undefined || v === "" ? undefined : v
}

const ADDRESS = /^(?:\[[0-9A-Fa-f:.]+\]|[^\s:/[\]]+):(\d{1,5})$/

export const DEFAULT_GATEWAY = "127.0.0.1:50051"

export const gatewayTargetFrom = (values: GatewayFlagValues, usage: string): GatewayTarget => {
  const address = pick(values.gateway, "T1_GATEWAY") ?? DEFAULT_GATEWAY
  const port = Number(ADDRESS.exec(address)?.[1] ?? Number.NaN)
  if (!(port >= 1 && port <= 65_535)) {
    throw new UsageError(
      `--gateway must be HOST:PORT (or [IPv6]:PORT), e.g. ${DEFAULT_GATEWAY}, got ${JSON.stringify(address)}`,
      usage,
    )
  }
  const token = pick(values.token, "T1_TOKEN")
  if (token !== undefined && !/^[\x21-\x7e]+$/.test(token)) {
    throw new UsageError("--token must be printable ASCII without spaces", usage)
  }
  const caFile = pick(values["tls-ca"], "T1_GATEWAY_TLS_CA")
  let ca: Uint8Array | undefined
  if (caFile !== undefined) {
    try {
      ca = readFileSync(caFile)
    } catch (error) {
      throw new UsageError(
        `--tls-ca: cannot read ${caFile}: ${error instanceof Error ? error.message : error}`,
        usage,
      )
    }
  }
  const serverName = pick(values["tls-server-name"], "T1_GATEWAY_TLS_SERVER_NAME")
  const tlsOn = ca !== undefined || values.tls === true
  if (serverName !== undefined && !tlsOn) {
    throw new UsageError("--tls-server-name needs --tls-ca or --tls", usage)
  }
  const tls: JobServiceClientOptions["tls"] = !tlsOn
    ? undefined
    : ca === undefined && serverName === undefined
      ? true
      : {
          ...(ca === undefined ? {} : { ca }),
          ...(serverName === undefined ? {} : { serverName }),
        }
  const timeoutMs = intFlag("timeout-ms", values["timeout-ms"], 30_000, usage, 1)
  return {
    address,
    options: {
      timeoutMs,
      ...(token === undefined ? {} : { token }),
      ...(tls === undefined ? {} : { tls }),
    },
  }
}

/** Where a command writes: results on `out` (stdout), progress and notes on `err` (stderr). */
export interface Output {
  readonly out: (line: string) => void
  readonly err: (line: string) => void
}

export const stdio: Output = {
  out: (line) => {
    process.stdout.write(`${line}\n`)
  },
  err: (line) => {
    process.stderr.write(`${line}\n`)
  },
}

/** A gateway call failed; the message is what the user reads after `t1: `. */
export class GatewayFailure extends Data.TaggedError("GatewayFailure")<{
  readonly code: grpc.status
  readonly report: string
}> {
  override get message(): string {
    return this.report
  }
}

const HINTS: Partial<Record<grpc.status, (address: string) => string>> = {
  [grpc.status.UNAVAILABLE]: (address) =>
    `is a gateway serving at ${address}? (t1 gateway, or --gateway / T1_GATEWAY)`,
  [grpc.status.UNAUTHENTICATED]: () => "pass a bearer token with --token or T1_TOKEN",
  [grpc.status.PERMISSION_DENIED]: () => "submitting and cancelling jobs need an admin token",
  [grpc.status.DEADLINE_EXCEEDED]: () => "the call took longer than --timeout-ms",
}

/** The status message, without grpc-js's empty `Resolution note:` tail. */
export const callDetails = (error: GatewayCallError): string =>
  error.details.replace(/\.?\s*Resolution note:\s*$/, "")

/**
 * `INVALID_ARGUMENT: spec.task_set: required` and, below it, one `field` line per
 * `t1-field-path` trailer value, then a hint for the codes that have one.
 */
export const describeCallError = (error: GatewayCallError, address: string): string => {
  const lines = [`${error.codeName}: ${callDetails(error)}`]
  for (const path of error.fieldPaths) lines.push(`  field ${path}`)
  if (error.fieldPaths.length === 0 && error.detail?.fieldPath) {
    lines.push(`  field ${error.detail.fieldPath}`)
  }
  const hint = HINTS[error.code]
  if (hint !== undefined) lines.push(`  hint: ${hint(address)}`)
  return lines.join("\n")
}

/**
 * Runs `program` with a client of the target, closed afterwards; a failed call becomes a
 * {@link GatewayFailure} whose message is {@link describeCallError}'s report.
 */
export const withGateway = <A, E>(
  target: GatewayTarget,
  program: (client: JobServiceClient) => Effect.Effect<A, E>,
): Effect.Effect<A, Exclude<E, GatewayCallError> | GatewayFailure> =>
  Effect.scoped(
    Effect.flatMap(jobServiceClientScoped(target.address, target.options), program),
  ).pipe(
    Effect.mapError((error) =>
      error instanceof GatewayCallError
        ? new GatewayFailure({
            code: error.code,
            report: describeCallError(error, target.address),
          })
        : (error as Exclude<E, GatewayCallError>),
    ),
  )
