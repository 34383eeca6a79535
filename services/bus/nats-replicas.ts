/**
 * The replica count of every stream, KV bucket and object store t1 creates (`--nats-replicas`,
 * `T1_NATS_REPLICAS`): checked against the cluster when the bus connects, used on creation, and
 * raised on existing streams that hold fewer copies (a JetStream cluster moves a stream from R1
 * to R3 in place). A stream that holds more copies than asked keeps them: one process started
 * without the setting must not strip a cluster's replication.
 */
import type { JetStreamManager, StreamConfig } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/nats-core"
import { Effect } from "effect"
import { JetStreamError, ReplicasExceedCluster, reasonOf } from "./errors.ts"

/** JetStream's own limit on a stream's replicas. */
export const MAX_REPLICAS = 5

/** Why `n` is no replica count, or undefined when it is one. */
export const replicaCountProblem = (n: number): string | undefined =>
  Number.isInteger(n) && n >= 1 && n <= MAX_REPLICAS
    ? undefined
    : `a replica count is an integer from 1 to ${MAX_REPLICAS} (JetStream's limit), got ${n}`

/**
 * The servers of the connected cluster as the server's INFO shows them: `connect_urls` carries
 * the client URL of every server its routes reach, its own included. A server without a cluster
 * block is a cluster of one; a cluster that advertises nothing (`no_advertise`) cannot be counted
 * here, and the server's own refusal at creation is the check then.
 */
export const clusterServers = (
  nc: NatsConnection,
): { readonly clustered: boolean; readonly servers: ReadonlyArray<string> } => {
  const info = nc.info
  const self = info === undefined ? [] : [`${info.host}:${info.port}`]
  if (info?.cluster === undefined) return { clustered: false, servers: self }
  return { clustered: true, servers: [...new Set(info.connect_urls ?? [])] }
}

/**
 * How long a cluster may take to show enough servers: a node just started learns its peers' URLs
 * as its routes connect, and tells its clients in later INFOs.
 */
const CLUSTER_SHOW_MS = 10_000

/**
 * Fails when the cluster cannot hold `replicas` copies of a stream: at once on a server without
 * a cluster block, after CLUSTER_SHOW_MS on a cluster that shows fewer servers than asked.
 */
export const checkReplicas = (
  nc: NatsConnection,
  replicas: number,
): Effect.Effect<void, ReplicasExceedCluster> => {
  if (replicas === 1) return Effect.void
  const shortOf = (): ReplicasExceedCluster | undefined => {
    const { clustered, servers } = clusterServers(nc)
    if (!clustered) return new ReplicasExceedCluster({ replicas, clusterSize: 1, servers })
    return servers.length > 0 && replicas > servers.length
      ? new ReplicasExceedCluster({ replicas, clusterSize: servers.length, servers })
      : undefined
  }
  const first = shortOf()
  if (first === undefined) return Effect.void
  if (first.clusterSize === 1 && !clusterServers(nc).clustered) return Effect.fail(first)
  return Effect.gen(function* () {
    yield* Effect.logWarning(
      `nats: the cluster shows ${first.clusterSize} server(s), --nats-replicas ${replicas} asked; waiting up to ${CLUSTER_SHOW_MS / 1000} s for more`,
    )
    for (let waited = 0; waited < CLUSTER_SHOW_MS; waited += 250) {
      yield* Effect.sleep("250 millis")
      if (shortOf() === undefined) return
    }
    const last = shortOf()
    if (last !== undefined) return yield* Effect.fail(last)
  })
}

// JetStream's refusals of a replica count: 10005 no suitable peers for placement (a cluster with
// fewer servers up), 10023 insufficient resources, 10074 replicas > 1 on a server without a cluster.
const REPLICA_REFUSAL =
  /no suitable peers for placement|insufficient resources|replicas > 1 not supported/i

/** The server refused a stream's replica count: the typed error naming the stream, else none. */
export const replicaRefusal = (
  nc: NatsConnection,
  replicas: number,
  stream: string,
  cause: unknown,
): ReplicasExceedCluster | undefined => {
  if (replicas === 1 || !REPLICA_REFUSAL.test(reasonOf(cause))) return undefined
  const { clustered, servers } = clusterServers(nc)
  return new ReplicasExceedCluster({
    replicas,
    clusterSize: clustered ? servers.length : 1,
    servers,
    stream,
  })
}

/**
 * The replica count an existing stream is brought to: the one asked when it holds fewer, its own
 * when it holds more.
 */
export const replicasFor = (existing: number | undefined, wanted: number): number =>
  Math.max(existing ?? 1, wanted)

/** How long a stream given more replicas may take to elect a leader and copy itself over. */
const SETTLE_TIMEOUT_MS = 60_000

/**
 * Waits until a stream whose replicas were raised has a leader and every new copy is current: the
 * server answers the update at once and moves the stream to its new raft group afterwards, and
 * until then requests on it time out. Gives up with a warning after SETTLE_TIMEOUT_MS.
 */
const settled = (jsm: JetStreamManager, stream: string, replicas: number) =>
  Effect.tryPromise({
    try: async () => {
      const until = Date.now() + SETTLE_TIMEOUT_MS
      while (Date.now() < until) {
        const info = await jsm.streams.info(stream).catch(() => undefined)
        const peers = info?.cluster?.replicas ?? []
        if (
          info?.cluster?.leader !== undefined &&
          peers.length === replicas - 1 &&
          peers.every((p) => p.current)
        )
          return true
        await new Promise((r) => setTimeout(r, 200))
      }
      return false
    },
    catch: (cause) => reasonOf(cause),
  }).pipe(
    Effect.catch(() => Effect.succeed(false)),
    Effect.flatMap((ok) =>
      ok
        ? Effect.void
        : Effect.logWarning(
            `nats: stream ${stream} was updated to ${replicas} replicas but has not caught up within ${SETTLE_TIMEOUT_MS / 1000} s`,
          ),
    ),
  )

/** Logs a stream whose replicas were raised, once its new copies are current. */
export const reportReplicaChange = (
  jsm: JetStreamManager,
  stream: string,
  from: number,
  to: number,
) =>
  from === to
    ? Effect.void
    : Effect.andThen(
        settled(jsm, stream, to),
        Effect.logInfo(
          `nats: stream ${stream} held ${from} replica(s); updated to ${to} (--nats-replicas)`,
        ),
      )

/**
 * Raises an existing KV bucket's or object store's stream (`KV_<bucket>`, `OBJ_<bucket>`) to
 * `wanted` replicas: nats.js opens an existing bucket as it is. A refused update (a role allowed
 * to read a bucket but not to change it) is logged, with the stream, what it holds and what was
 * asked, and the bucket used as it is.
 */
export const raiseBucketReplicas = (
  jsm: JetStreamManager,
  stream: string,
  wanted: number,
): Effect.Effect<void, JetStreamError> =>
  Effect.gen(function* () {
    const info = yield* Effect.tryPromise({
      try: () => jsm.streams.info(stream),
      catch: (cause) =>
        new JetStreamError({ operation: `stream info ${stream}`, reason: reasonOf(cause) }),
    })
    const held = info.config.num_replicas
    if (held >= wanted) return
    const config: Partial<StreamConfig> = { ...info.config, num_replicas: wanted }
    yield* Effect.tryPromise({
      try: () => jsm.streams.update(stream, config),
      catch: (cause) => reasonOf(cause),
    }).pipe(
      Effect.andThen(reportReplicaChange(jsm, stream, held, wanted)),
      Effect.catch((reason) =>
        Effect.logWarning(
          `nats: stream ${stream} holds ${held} replica(s), ${wanted} asked (--nats-replicas), and could not be updated: ${reason}; an admin can run: nats stream edit ${stream} --replicas ${wanted}`,
        ),
      ),
    )
  })
