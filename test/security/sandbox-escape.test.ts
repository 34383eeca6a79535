/**
 * The escape attempts of escape-suite.ts on the Docker driver: the host's view of a sandbox is
 * the engine's (`docker inspect`), networked sandboxes join the bridge `t1-sandboxes`.
 */

import { expect } from "vitest"
import { bridgeName } from "../../actors/sandbox/docker/firewall.ts"
import { connectDocker } from "../../actors/sandbox/docker/index.ts"
import { SANDBOX_NETWORK, SANDBOX_NETWORK_OPTIONS } from "../../actors/sandbox/docker/spec.ts"
import { TOOLCHAIN_ROOT } from "../../actors/sandbox/toolchain/index.ts"
import { escapeSuite } from "./escape-suite.ts"

const docker = connectDocker()

/** The sandbox network `id` joined, as the engine reports it. */
const networkOf = async (id: string) => {
  const info = await docker.getContainer(id).inspect()
  const joined = info.NetworkSettings.Networks[SANDBOX_NETWORK]
  const network = await docker.getNetwork(joined?.NetworkID ?? "").inspect()
  return { info, joined, network }
}

escapeSuite({
  driver: "docker",
  titles: {
    networkedIsolation: "its own bridge",
    reachableAddresses: "the sandbox bridge's gateway, docker0, every host address",
  },
  // sysfs shows lo, and so does /proc/net/dev.
  interfacesListed: ["lo", "lo"],
  virtualFs: new Set(["proc", "tmpfs", "devpts", "sysfs", "cgroup", "cgroup2", "mqueue"]),
  hostFiles: async (id) => {
    const ownFiles = `${(await docker.info()).DockerRootDir}/containers/${id}/`
    // The engine's per-container files, and its init, read-only.
    return (m) =>
      (m.root.startsWith(ownFiles) &&
        ["/etc/resolv.conf", "/etc/hostname", "/etc/hosts"].includes(m.point)) ||
      (m.point.endsWith("/docker-init") && m.options.split(",").includes("ro"))
  },
  readOnlyHostFiles: ["/usr/sbin/docker-init"],
  networkedAddress: async (c) => {
    const { info, joined, network } = await networkOf(c)
    expect(Object.keys(info.NetworkSettings.Networks)).toEqual([SANDBOX_NETWORK])
    expect(network.Options).toMatchObject(SANDBOX_NETWORK_OPTIONS)
    return joined?.IPAddress ?? ""
  },
  bridgeOf: async (id) => {
    const { network } = await networkOf(id)
    return { bridge: bridgeName(network), gateway: network.IPAM?.Config?.[0]?.Gateway }
  },
  init: /^1 \S*docker-init\b/,
  checkUnprivileged: async (id) => {
    const inspected = await docker.getContainer(id).inspect()
    expect(inspected.HostConfig.Privileged).toBe(false)
    expect(inspected.HostConfig.Binds ?? []).toEqual([])
    // The one mount: the verifier's toolchain, a volume, read-only.
    expect(inspected.Mounts.map((m) => [m.Type, m.Destination, m.RW])).toEqual([
      ["volume", TOOLCHAIN_ROOT, false],
    ])
    expect(inspected.HostConfig.NetworkMode).toBe("none")
    expect(inspected.HostConfig.SecurityOpt).toContain("no-new-privileges:true")
  },
  limits: async (id) => {
    const c = (await docker.getContainer(id).inspect()).HostConfig
    return {
      cpus: (c.NanoCpus ?? 0) / 1e9,
      memoryBytes: c.Memory ?? 0,
      pids: c.PidsLimit ?? 0,
      memorySwapBytes: c.MemorySwap ?? 0,
    }
  },
  swapLimit: true,
  pidsCurrent: "in the sandbox",
})
