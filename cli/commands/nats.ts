import { existsSync, readFileSync } from "node:fs"
import { resolve } from "node:path"
import { Effect } from "effect"
import { intFlag, parseFlags, UsageError } from "../flags.ts"
import { CLUSTER_NODES, freeLoopbackPort, startNatsCluster } from "../nats-cluster.ts"

const DEFAULT_CONFIG = new URL("../../deploy/nats/nats-server.conf", import.meta.url).pathname

export const natsUsage = () => `Usage: t1 nats cluster [options]

Starts a ${CLUSTER_NODES}-node NATS JetStream cluster on loopback (127.0.0.1) in the foreground and
prints its client URLs, comma-separated, for --nats (then run t1 with --nats-replicas 3). Each node
has its own server name (<name>-1 …), client port, cluster port and directory <dir>/<name>-N/
(nats.conf, store/, nats.log); every node routes to the other two. Ctrl-C stops the nodes; their
stores stay, so the same command starts the cluster again with its streams.

Each node starts from --config (by default deploy/nats/nats-server.conf: its users and role
permissions, every role password read from T1_NATS_<ROLE>_PASSWORD as that file says) and then
listens on its own ports.

Options:
  --dir DIR            where the nodes' files go (default ./t1-nats-cluster)
  --client-port P      node 1's client port; nodes 2 and 3 take P+1, P+2 (default 4222; 0: free ports)
  --cluster-port P     node 1's cluster (route) port; P+1, P+2 for the others (default 6222; 0: free ports)
  --name NAME          cluster name and server-name stem (default t1)
  --config FILE|none   configuration each node starts from (default deploy/nats/nats-server.conf);
                       none: no users, anyone on this machine may connect
  --json               print {"urls": …, "nodes": [{name, url, store, log}]} instead of the URLs`

const spec = {
  dir: { type: "string" },
  "client-port": { type: "string" },
  "cluster-port": { type: "string" },
  name: { type: "string" },
  config: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const

const ports = async (first: number): Promise<number[]> => {
  if (first !== 0) return Array.from({ length: CLUSTER_NODES }, (_, i) => first + i)
  const out: number[] = []
  while (out.length < CLUSTER_NODES) {
    const p = await freeLoopbackPort()
    if (!out.includes(p)) out.push(p)
  }
  return out
}

export const natsCommand = (args: ReadonlyArray<string>): Effect.Effect<void, unknown> | string => {
  const usage = natsUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  const [sub, ...rest] = positionals
  if (sub !== "cluster")
    throw new UsageError(`unknown nats command ${JSON.stringify(sub ?? "")}`, usage)
  if (rest.length > 0) throw new UsageError(`unexpected arguments: ${rest.join(" ")}`, usage)
  const portFlag = (flag: "client-port" | "cluster-port", fallback: number) => {
    const p = intFlag(flag, values[flag], fallback, usage, 0)
    if (p !== 0 && (p < 1 || p + CLUSTER_NODES - 1 > 65_535))
      throw new UsageError(`--${flag} ${p}: the ${CLUSTER_NODES} ports must lie in 1-65535`, usage)
    return p
  }
  const clientPort = portFlag("client-port", 4222)
  const clusterPort = portFlag("cluster-port", 6222)
  const name = values.name ?? "t1"
  if (!/^[A-Za-z0-9_-]+$/.test(name))
    throw new UsageError(`--name must be [A-Za-z0-9_-], got ${JSON.stringify(name)}`, usage)
  const config = values.config ?? DEFAULT_CONFIG
  if (config !== "none" && !existsSync(config))
    throw new UsageError(`--config ${config}: no such file`, usage)
  const baseConfig = config === "none" ? undefined : readFileSync(config, "utf8")
  const dir = resolve(values.dir ?? "t1-nats-cluster")
  return Effect.gen(function* () {
    const clientPorts = yield* Effect.promise(() => ports(clientPort))
    const clusterPorts = yield* Effect.promise(() => ports(clusterPort))
    const overlap = clientPorts.filter((p) => clusterPorts.includes(p))
    if (overlap.length > 0)
      return yield* Effect.fail(
        new Error(`client and cluster ports overlap: ${overlap.join(", ")}`),
      )
    const cluster = yield* Effect.acquireRelease(
      Effect.tryPromise(() =>
        startNatsCluster({
          dir,
          clientPorts,
          clusterPorts,
          name,
          ...(baseConfig === undefined ? {} : { baseConfig }),
        }),
      ),
      (c) => Effect.promise(() => c.stop()),
    )
    console.log(
      values.json === true
        ? JSON.stringify({
            urls: cluster.urls,
            nodes: cluster.nodes.map((n) => ({
              name: n.name,
              url: n.url,
              store: n.storeDir,
              log: n.logFile,
            })),
          })
        : cluster.urls,
    )
    yield* Effect.never
  }).pipe(Effect.scoped)
}
