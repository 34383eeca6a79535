import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  CLUSTER_NODES,
  listens,
  type NatsCluster,
  startNatsCluster,
} from "../../cli/nats-cluster.ts"
import { freePort, natsServerAvailable } from "./nats-server.ts"

export type { NatsCluster, NatsClusterNode } from "../../cli/nats-cluster.ts"

/** A three-node JetStream cluster on loopback that a test owns: free ports, a temporary store. */
export interface TestNatsCluster extends NatsCluster {
  /** Kills (SIGKILL) or stops (SIGTERM) the node, then starts it again on its ports and store. */
  readonly restart: (node: number, how?: "kill" | "stop") => Promise<void>
  /**
   * Cuts the node off from the other two: it is killed and started again on its client port and
   * store, but listening for routes on another port and routing only to a port nothing listens
   * on (nats-server will not start clustered JetStream without a route), so that it and the
   * others cannot reach each other (clients can still connect to it). Resolves once it listens.
   */
  readonly partition: (node: number) => Promise<void>
  /** Ends a partition: the cut-off node is stopped and started again in the cluster. */
  readonly heal: (node: number) => Promise<void>
  /** Stops every node and removes the stores. */
  readonly close: () => Promise<void>
}

/**
 * Starts the cluster the way `t1 nats cluster` does (cli/nats-cluster.ts), on free loopback
 * ports. `baseConfig`: configuration text every node starts from (e.g. deploy/nats's roles);
 * none: open servers, as the single-server helper starts them.
 */
export const startTestNatsCluster = async (
  options: { readonly baseConfig?: string } = {},
): Promise<TestNatsCluster> => {
  if (!natsServerAvailable()) {
    throw new Error("nats-server not found: install it (apt-get install nats-server)")
  }
  const ports: number[] = []
  // freePort closes its probe before returning, so two calls can return one port: draw distinct.
  while (ports.length < 2 * CLUSTER_NODES) {
    const p = await freePort()
    if (!ports.includes(p)) ports.push(p)
  }
  const dir = mkdtempSync(join(tmpdir(), "t1-nats-cluster-"))
  const cluster = await startNatsCluster({
    dir,
    clientPorts: ports.slice(0, CLUSTER_NODES),
    clusterPorts: ports.slice(CLUSTER_NODES),
    name: "t1test",
    ...(options.baseConfig === undefined ? {} : { baseConfig: options.baseConfig }),
  })
  const nodeAt = (i: number) => {
    const n = cluster.nodes[i]
    if (n === undefined) throw new RangeError(`no node ${i} (0 to ${CLUSTER_NODES - 1})`)
    return n
  }
  const cut = new Map<number, ChildProcess>()
  return {
    ...cluster,
    partition: async (i) => {
      const n = nodeAt(i)
      await n.kill()
      const conf = readFileSync(join(dir, n.name, "nats.conf"), "utf8")
      const alone = conf.replace(
        /cluster \{[\s\S]*\}\s*$/,
        // A clustered JetStream server will not start without a route: one to a port that
        // nothing listens on.
        `cluster {\n  name: "t1test"\n  listen: "127.0.0.1:${await freePort()}"\n  routes: ["nats-route://127.0.0.1:${await freePort()}"]\n}\n`,
      )
      if (alone === conf) throw new Error(`no cluster block in ${n.name}'s configuration`)
      const file = join(dir, n.name, "partitioned.conf")
      writeFileSync(file, alone)
      const binary = process.env.T1_NATS_SERVER_BIN ?? "nats-server"
      const child = spawn(binary, ["-c", file], { stdio: "ignore" })
      cut.set(i, child)
      const until = Date.now() + 15_000
      while (!(await listens(n.clientPort))) {
        if (child.exitCode !== null || Date.now() > until)
          throw new Error(`partitioned ${n.name} did not listen on ${n.clientPort}`)
        await new Promise((r) => setTimeout(r, 50))
      }
    },
    heal: async (i) => {
      const child = cut.get(i)
      if (child !== undefined && child.exitCode === null && child.signalCode === null) {
        const exited = once(child, "exit")
        child.kill("SIGTERM")
        await exited
      }
      cut.delete(i)
      await nodeAt(i).start()
    },
    restart: async (i, how = "kill") => {
      const n = nodeAt(i)
      await (how === "kill" ? n.kill() : n.stop())
      await n.start()
    },
    close: async () => {
      for (const child of cut.values()) child.kill("SIGKILL")
      await cluster.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
