/**
 * A three-node NATS JetStream cluster on one machine (`t1 nats cluster`, and the tests' cluster):
 * one nats-server per node with its own client port, cluster (route) port, server name, store
 * directory and log, every node routing to the other two. Each node's configuration starts from
 * a base file (deploy/nats/nats-server.conf: its users, roles and permissions on every node) and
 * then sets what is the node's own; nats-server keeps the last value of a repeated key.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { createServer, Socket } from "node:net"
import { join } from "node:path"

export const CLUSTER_NODES = 3

export interface NatsClusterOptions {
  /** Each node's files go under `<dir>/<node>/`: nats.conf, store/, nats.log. */
  readonly dir: string
  readonly clientPorts: ReadonlyArray<number>
  readonly clusterPorts: ReadonlyArray<number>
  /** The cluster's name (default t1); nodes are `<name>-1` … `<name>-3`. */
  readonly name?: string
  /** Configuration text every node starts from (its authorization block); none: open servers. */
  readonly baseConfig?: string
  /** The nats-server binary (default T1_NATS_SERVER_BIN, else nats-server on PATH). */
  readonly binary?: string
  /** How long start waits for the nodes to listen and elect a JetStream leader (default 30 s). */
  readonly readyTimeoutMs?: number
}

export interface NatsClusterNode {
  readonly name: string
  readonly url: string
  readonly clientPort: number
  readonly clusterPort: number
  readonly storeDir: string
  readonly logFile: string
  readonly running: () => boolean
  /** SIGKILL, like a crash: nothing flushed, no goodbye to the routes. */
  readonly kill: () => Promise<void>
  /** SIGTERM: a clean shutdown (the node steps down as a leader first). */
  readonly stop: () => Promise<void>
  /**
   * Starts the node (again: on its ports and store); resolves once it listens and its /healthz
   * is ok (JetStream's meta group current on it).
   */
  readonly start: () => Promise<void>
}

export interface NatsCluster {
  readonly nodes: ReadonlyArray<NatsClusterNode>
  /** Every node's client URL, comma-separated: the value for `--nats`. */
  readonly urls: string
  /** Stops every running node (SIGTERM). */
  readonly stop: () => Promise<void>
}

const ROUTE_HOST = "127.0.0.1"

/** One node's configuration: the base text, then the node's own listen, name, store and routes. */
export const nodeConfig = (
  options: NatsClusterOptions,
  index: number,
  storeDir: string,
  logFile: string,
): string => {
  const name = options.name ?? "t1"
  const clientPort = options.clientPorts[index]
  const clusterPort = options.clusterPorts[index]
  const routes = options.clusterPorts
    .filter((_, i) => i !== index)
    .map((p) => `    "nats-route://${ROUTE_HOST}:${p}"`)
  return `${options.baseConfig ?? ""}

# ---- node ${index + 1} of the ${name} cluster (written by t1 nats cluster) ----
listen: "${ROUTE_HOST}:${clientPort}"
server_name: "${name}-${index + 1}"
# Monitoring on a free loopback port (in the log): start waits for every node's /healthz.
http: "${ROUTE_HOST}:-1"
log_file: ${JSON.stringify(logFile)}
jetstream {
  store_dir: ${JSON.stringify(storeDir)}
}
cluster {
  name: "${name}"
  listen: "${ROUTE_HOST}:${clusterPort}"
  routes: [
${routes.join("\n")}
  ]
}
`
}

/** Whether something accepts connections on `port` of the loopback address. */
export const listens = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = new Socket()
    s.once("connect", () => {
      s.destroy()
      resolve(true)
    })
    s.once("error", () => resolve(false))
    s.connect(port, ROUTE_HOST)
  })

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const exited = (c: ChildProcess | undefined) =>
  new Promise<void>((resolve) => {
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return resolve()
    c.once("exit", () => resolve())
  })

const fileSize = (path: string) => (existsSync(path) ? statSync(path).size : 0)

const MONITOR = /Starting http monitor on [\d.]+:(\d+)/

/**
 * Whether a node's /healthz answers ok for the server itself: JetStream on and the meta group
 * current (a node that joins a group that has a leader logs no leader, so the log cannot say).
 * Streams and consumers are left out (js-server-only): a restarted node's idle consumers stay
 * "not current" for long after the node serves, and they catch up on their own.
 */
const healthy = async (logFile: string, fromByte: number): Promise<boolean> => {
  if (!existsSync(logFile)) return false
  const port = MONITOR.exec(readFileSync(logFile, "utf8").slice(fromByte))?.[1]
  if (port === undefined) return false
  try {
    const res = await fetch(`http://${ROUTE_HOST}:${port}/healthz?js-server-only=true`)
    return res.ok
  } catch {
    return false
  }
}

const checkOptions = (options: NatsClusterOptions) => {
  for (const [what, ports] of [
    ["client", options.clientPorts],
    ["cluster", options.clusterPorts],
  ] as const) {
    if (ports.length !== CLUSTER_NODES)
      throw new RangeError(`${CLUSTER_NODES} ${what} ports are needed, got ${ports.length}`)
  }
  const all = [...options.clientPorts, ...options.clusterPorts]
  if (new Set(all).size !== all.length)
    throw new RangeError(`every client and cluster port must differ, got ${all.join(", ")}`)
}

/**
 * Writes each node's configuration and starts the three nodes; resolves once every node listens
 * and is healthy (its JetStream meta group current), so streams can be created at once.
 */
export const startNatsCluster = async (options: NatsClusterOptions): Promise<NatsCluster> => {
  checkOptions(options)
  const binary = options.binary ?? process.env.T1_NATS_SERVER_BIN ?? "nats-server"
  const name = options.name ?? "t1"
  const nodes = options.clientPorts.map((clientPort, index): NatsClusterNode => {
    const nodeDir = join(options.dir, `${name}-${index + 1}`)
    const storeDir = join(nodeDir, "store")
    const logFile = join(nodeDir, "nats.log")
    const configFile = join(nodeDir, "nats.conf")
    mkdirSync(storeDir, { recursive: true })
    writeFileSync(configFile, nodeConfig(options, index, storeDir, logFile))
    let child: ChildProcess | undefined
    const running = () =>
      child !== undefined && child.exitCode === null && child.signalCode === null
    const start = async () => {
      if (running()) return
      const logFrom = fileSize(logFile)
      const c = spawn(binary, ["-c", configFile], { stdio: ["ignore", "ignore", "pipe"] })
      let stderr = ""
      c.stderr?.on("data", (d: Buffer) => {
        stderr += d.toString()
      })
      child = c
      const timeoutMs = options.readyTimeoutMs ?? 30_000
      const until = Date.now() + timeoutMs
      const fail = (what: string) => {
        const log = existsSync(logFile) ? readFileSync(logFile, "utf8").slice(-2000) : ""
        return new Error(`nats-server ${name}-${index + 1} ${what}: ${(stderr || log).trim()}`)
      }
      while (!(await listens(clientPort))) {
        if (!running() || Date.now() > until)
          throw fail(`did not listen on ${ROUTE_HOST}:${clientPort}`)
        await sleep(50)
      }
      // Listening is not serving JetStream: the node must join the meta group.
      while (!(await healthy(logFile, logFrom))) {
        if (!running() || Date.now() > until)
          throw fail(
            `was not healthy (JetStream meta group current) within ${timeoutMs} ms (${logFile})`,
          )
        await sleep(100)
      }
    }
    const signal = async (sig: NodeJS.Signals) => {
      const c = child
      if (c !== undefined && running()) c.kill(sig)
      await exited(c)
    }
    return {
      name: `${name}-${index + 1}`,
      url: `nats://${ROUTE_HOST}:${clientPort}`,
      clientPort,
      clusterPort: options.clusterPorts[index] ?? 0,
      storeDir,
      logFile,
      running,
      kill: () => signal("SIGKILL"),
      stop: () => signal("SIGTERM"),
      start,
    }
  })
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.stop()))
  }
  try {
    // Together: a node is healthy only once a quorum of the meta group is up.
    await Promise.all(nodes.map((n) => n.start()))
  } catch (error) {
    await stop()
    throw error
  }
  return { nodes, urls: nodes.map((n) => n.url).join(","), stop }
}

/** A port on loopback that nothing listens on now (the OS's pick; closed before returning). */
export const freeLoopbackPort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const srv = createServer()
    srv.unref()
    srv.on("error", reject)
    srv.listen(0, ROUTE_HOST, () => {
      const address = srv.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      srv.close(() => resolve(port))
    })
  })
