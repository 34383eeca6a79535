import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { CLUSTER_NODES, type NatsCluster, startNatsCluster } from "../../cli/nats-cluster.ts"
import { freePort, natsServerAvailable } from "./nats-server.ts"

export type { NatsCluster, NatsClusterNode } from "../../cli/nats-cluster.ts"

/** A three-node JetStream cluster on loopback that a test owns: free ports, a temporary store. */
export interface TestNatsCluster extends NatsCluster {
  /** Kills (SIGKILL) or stops (SIGTERM) the node, then starts it again on its ports and store. */
  readonly restart: (node: number, how?: "kill" | "stop") => Promise<void>
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
  return {
    ...cluster,
    restart: async (i, how = "kill") => {
      const n = nodeAt(i)
      await (how === "kill" ? n.kill() : n.stop())
      await n.start()
    },
    close: async () => {
      await cluster.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
