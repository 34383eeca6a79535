import { readFileSync } from "node:fs"
import {
  type ConnectionOptions,
  connect,
  credsAuthenticator,
  type NatsConnection,
} from "@nats-io/transport-node"
import { Effect, Schedule, type Scope } from "effect"
import { BusUnavailable, reasonOf } from "./errors.ts"

export interface NatsConnectOptions {
  /** One URL or several, comma-separated or as an array. */
  readonly servers: string | ReadonlyArray<string>
  readonly name?: string
  readonly user?: string
  readonly pass?: string
  readonly token?: string
  /** Path of a NATS .creds file (JWT + nkey seed). */
  readonly credsFile?: string
  readonly tls?: { readonly caFile?: string; readonly certFile?: string; readonly keyFile?: string }
  /**
   * Where replies to this connection's requests arrive (`<prefix>.<random>`; NATS's default is
   * `_INBOX`). A prefix of its own per role lets the server's permissions confine each role to
   * its own replies (deploy/nats/nats-server.conf).
   */
  readonly inboxPrefix?: string
  /** Attempts of the first connect before giving up; later drops reconnect forever. */
  readonly connectAttempts?: number
  readonly connectBackoffMs?: number
  /**
   * Copies of every stream, KV bucket and object store this bus creates (1 to 5; default 1),
   * checked against the cluster's servers when it connects. Existing ones holding fewer are
   * raised to it, ones holding more keep theirs (nats-replicas.ts).
   */
  readonly replicas?: number
}

const serverList = (servers: NatsConnectOptions["servers"]): string[] =>
  (typeof servers === "string" ? servers.split(",") : [...servers])
    .map((s) => s.trim())
    .filter((s) => s.length > 0)

const connectionOptions = (options: NatsConnectOptions): ConnectionOptions => {
  const opts: ConnectionOptions = {
    servers: serverList(options.servers),
    name: options.name ?? "t1",
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: false,
    // nats.js otherwise builds two Errors (stack traces included) per request to give a failed
    // request an async stack; t1 maps failures to its own typed errors and never shows that
    // stack, and on the trajectory stream (one JetStream publish per megabyte chunk) capturing
    // them was ~5% of the sampler side's CPU (bench:stream profile).
    noAsyncTraces: true,
  }
  if (options.user !== undefined) opts.user = options.user
  if (options.pass !== undefined) opts.pass = options.pass
  if (options.token !== undefined) opts.token = options.token
  if (options.credsFile !== undefined) {
    opts.authenticator = credsAuthenticator(readFileSync(options.credsFile))
  }
  if (options.tls !== undefined) opts.tls = { ...options.tls }
  if (options.inboxPrefix !== undefined) opts.inboxPrefix = options.inboxPrefix
  return opts
}

/**
 * A connection that is drained when the scope closes. The first connect retries with
 * jittered exponential backoff and logs each failure, then fails with BusUnavailable.
 */
export const connectNats = (
  options: NatsConnectOptions,
): Effect.Effect<NatsConnection, BusUnavailable, Scope.Scope> => {
  const servers = serverList(options.servers).join(",")
  const attempts = Math.max(1, options.connectAttempts ?? 10)
  const backoff = Schedule.min([
    Schedule.exponential(`${options.connectBackoffMs ?? 250} millis`),
    Schedule.spaced("5 seconds"),
  ]).pipe(Schedule.jittered, Schedule.upTo({ times: attempts - 1 }))
  let attempt = 0
  const once = Effect.suspend(() =>
    Effect.tryPromise({
      try: () => connect(connectionOptions(options)),
      catch: (cause) => new BusUnavailable({ servers, reason: reasonOf(cause) }),
    }).pipe(
      Effect.tapError((e) =>
        ++attempt < attempts
          ? Effect.logWarning(`${e.message}; retrying (attempt ${attempt + 1} of ${attempts})`)
          : Effect.void,
      ),
    ),
  )
  const connectWithRetry = Effect.suspend(() => {
    attempt = 0
    return Effect.retry(once, backoff)
  })
  return Effect.acquireRelease(connectWithRetry, (nc) =>
    Effect.promise(() => (nc.isClosed() ? Promise.resolve() : nc.drain().catch(() => undefined))),
  )
}
