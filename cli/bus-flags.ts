import { MAX_NATS_REPLICAS, type NatsConnectOptions } from "../services/bus/index.ts"
import { intFlag, UsageError } from "./flags.ts"

export const natsFlagSpec = {
  nats: { type: "string" },
  "nats-creds": { type: "string" },
  "nats-user": { type: "string" },
  "nats-password": { type: "string" },
  "nats-token": { type: "string" },
  "nats-tls-ca": { type: "string" },
  "nats-tls-cert": { type: "string" },
  "nats-tls-key": { type: "string" },
  "nats-inbox-prefix": { type: "string" },
  "nats-connect-attempts": { type: "string" },
  "nats-replicas": { type: "string" },
  prefix: { type: "string" },
} as const

export const natsFlagsHelp = `NATS options (each also read from the environment variable shown):
  --nats URL[,URL…]            servers (T1_NATS_URL; default nats://127.0.0.1:4222)
  --nats-creds FILE            .creds file with JWT and nkey seed (T1_NATS_CREDS)
  --nats-user NAME             user name (T1_NATS_USER)
  --nats-password SECRET       password (T1_NATS_PASSWORD; prefer the variable)
  --nats-token SECRET          token (T1_NATS_TOKEN; prefer the variable)
  --nats-tls-ca FILE           CA bundle to verify the server (T1_NATS_TLS_CA)
  --nats-tls-cert FILE         client certificate for mutual TLS (T1_NATS_TLS_CERT)
  --nats-tls-key FILE          client key for mutual TLS (T1_NATS_TLS_KEY)
  --nats-inbox-prefix P        where replies arrive (T1_NATS_INBOX_PREFIX; default _INBOX_<user> with
                               --nats-user, else _INBOX): deploy/nats/nats-server.conf lets each user
                               read only its own
  --nats-connect-attempts N    first-connect attempts before giving up (T1_NATS_CONNECT_ATTEMPTS; default 10)
  --nats-replicas N            copies of every stream, KV bucket and object store t1 creates, 1 to 5
                               (T1_NATS_REPLICAS; default 1; 3 on a three-node cluster): more than the
                               cluster's servers is refused at start, existing ones holding fewer are
                               raised to N
  --prefix NAME                subject prefix (T1_SUBJECT_PREFIX; default t1)`

type NatsFlagValues = { readonly [K in keyof typeof natsFlagSpec]?: string | undefined }

const pick = (flag: string | undefined, env: string): string | undefined => {
  const v = flag ?? process.env[env]
  return v === undefined || v === "" ? undefined : v
}

export const natsOptionsFrom = (
  values: NatsFlagValues,
  usage: string,
  name: string,
): NatsConnectOptions => {
  const servers = pick(values.nats, "T1_NATS_URL") ?? "nats://127.0.0.1:4222"
  for (const s of servers.split(",")) {
    if (!/^(nats|tls|ws|wss):\/\/[^\s/]+$|^[^\s:/]+:\d+$/.test(s.trim())) {
      throw new UsageError(
        `--nats: ${JSON.stringify(s)} is not a NATS URL like nats://host:4222`,
        usage,
      )
    }
  }
  const user = pick(values["nats-user"], "T1_NATS_USER")
  const pass = pick(values["nats-password"], "T1_NATS_PASSWORD")
  const token = pick(values["nats-token"], "T1_NATS_TOKEN")
  const credsFile = pick(values["nats-creds"], "T1_NATS_CREDS")
  const caFile = pick(values["nats-tls-ca"], "T1_NATS_TLS_CA")
  const certFile = pick(values["nats-tls-cert"], "T1_NATS_TLS_CERT")
  const keyFile = pick(values["nats-tls-key"], "T1_NATS_TLS_KEY")
  const inboxPrefix = inboxPrefixOf(
    pick(values["nats-inbox-prefix"], "T1_NATS_INBOX_PREFIX"),
    user,
    usage,
  )
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new UsageError("--nats-tls-cert and --nats-tls-key go together", usage)
  }
  const tls =
    caFile === undefined && certFile === undefined
      ? undefined
      : {
          ...(caFile === undefined ? {} : { caFile }),
          ...(certFile === undefined ? {} : { certFile }),
          ...(keyFile === undefined ? {} : { keyFile }),
        }
  const replicas = replicasFrom(pick(values["nats-replicas"], "T1_NATS_REPLICAS"), usage)
  return {
    servers,
    name,
    replicas,
    connectAttempts: intFlag(
      "nats-connect-attempts",
      pick(values["nats-connect-attempts"], "T1_NATS_CONNECT_ATTEMPTS"),
      10,
      usage,
      1,
    ),
    ...(user === undefined ? {} : { user }),
    ...(pass === undefined ? {} : { pass }),
    ...(token === undefined ? {} : { token }),
    ...(credsFile === undefined ? {} : { credsFile }),
    ...(tls === undefined ? {} : { tls }),
    ...(inboxPrefix === undefined ? {} : { inboxPrefix }),
  }
}

/**
 * For commands whose bus is in memory unless NATS is named (`t1 up`, `t1 serve`): a replica
 * count there would be silently dropped, so it is refused.
 */
export const refuseReplicasInMemory = (values: NatsFlagValues, usage: string): void => {
  if (values["nats-replicas"] !== undefined)
    throw new UsageError(
      "--nats-replicas applies to NATS streams: pass --nats (or T1_NATS_URL) with it; the in-memory bus keeps one copy",
      usage,
    )
}

const replicasFrom = (raw: string | undefined, usage: string): number => {
  if (raw === undefined) return 1
  const n = Number(raw)
  if (!/^\d+$/.test(raw) || n < 1 || n > MAX_NATS_REPLICAS) {
    throw new UsageError(
      `--nats-replicas must be an integer from 1 to ${MAX_NATS_REPLICAS} (JetStream's limit; 3 on a three-node cluster), got ${JSON.stringify(raw)}`,
      usage,
    )
  }
  return n
}

const SUBJECT_TOKENS = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/

/**
 * The inbox prefix: the one given, else `_INBOX_<user>` for a named user (so that the server can
 * confine each user to its own replies), else NATS's default.
 */
const inboxPrefixOf = (
  given: string | undefined,
  user: string | undefined,
  usage: string,
): string | undefined => {
  if (given !== undefined) {
    if (!SUBJECT_TOKENS.test(given))
      throw new UsageError(
        `--nats-inbox-prefix must be subject tokens ([A-Za-z0-9_-], dot-separated), got ${JSON.stringify(given)}`,
        usage,
      )
    return given
  }
  if (user === undefined) return undefined
  if (!/^[A-Za-z0-9_-]+$/.test(user))
    throw new UsageError(
      `--nats-user ${JSON.stringify(user)} cannot name an inbox (_INBOX_<user>): pass --nats-inbox-prefix`,
      usage,
    )
  return `_INBOX_${user}`
}

export const prefixFrom = (values: NatsFlagValues, usage: string): string => {
  const prefix = pick(values.prefix, "T1_SUBJECT_PREFIX") ?? "t1"
  if (!/^[A-Za-z0-9_-]+$/.test(prefix)) {
    throw new UsageError(
      `--prefix must be one subject token ([A-Za-z0-9_-]), got ${JSON.stringify(prefix)}`,
      usage,
    )
  }
  return prefix
}
