/**
 * The escape attempts of escape-suite.ts on the bwrap driver: the host's view of a sandbox is its
 * cgroups and uid map, networked sandboxes sit on bwrap's own bridge (network.ts).
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { expect } from "vitest"
import { defaultBwrapRoot } from "../../actors/sandbox/bwrap/index.ts"
import { BWRAP_BRIDGE, BWRAP_GATEWAY } from "../../actors/sandbox/bwrap/network.ts"
import { escapeSuite, q, type Shell } from "./escape-suite.ts"

/** A bwrap sandbox's cgroup directories, from its metadata on the host. */
const cgroupsOf = (id: string): ReadonlyArray<string> =>
  (
    JSON.parse(readFileSync(join(defaultBwrapRoot(), id, "meta.json"), "utf8")) as {
      cgroups: string[]
    }
  ).cgroups
const cgroupValue = (id: string, controller: string, file: string): string => {
  const dir = cgroupsOf(id).find((d) => d.includes(`/${controller}/`)) ?? cgroupsOf(id)[0] ?? ""
  return readFileSync(join(dir, file), "utf8").trim()
}

/** The sandbox's own IPv4 address on bwrap's bridge. */
const addressOf = async (sh: Shell, id: string) =>
  (
    await sh(
      id,
      `python3 -c ${q(`import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("${BWRAP_GATEWAY}", 9))
print(s.getsockname()[0])`)}`,
    )
  ).text.trim()

/** The device nodes bwrap's /dev binds from the host (as docker's /dev has them). */
const DEVICES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"]

escapeSuite({
  driver: "bwrap",
  titles: {
    networkedIsolation: "isolated bridge ports",
    reachableAddresses: "the bridge's gateway, every host address",
  },
  // No sysfs in a bwrap sandbox: /sys is the image's empty directory.
  interfacesListed: ["lo"],
  virtualFs: new Set(["proc", "tmpfs", "devpts", "mqueue"]),
  hostFiles: async () => (m) =>
    m.fstype === "devtmpfs" && DEVICES.includes(m.point) && m.root === m.point.slice(4),
  readOnlyHostFiles: [],
  networkedAddress: async (c, d, sh) => {
    const ip = await addressOf(sh, c)
    expect(ip).toMatch(/^10\.213\.\d+\.\d+$/)
    expect(await addressOf(sh, d)).not.toBe(ip)
    return ip
  },
  bridgeOf: async () => ({ bridge: BWRAP_BRIDGE, gateway: BWRAP_GATEWAY }),
  // PID 1 is bwrap's init, the keeper its one child; then the shells.
  init: /^1 \S*bwrap\b/,
  checkUnprivileged: async (id, sh) => {
    // Root in the sandbox is an unprivileged uid of the host, the only one its namespace maps.
    const maps = await sh(id, "cat /proc/self/uid_map /proc/self/gid_map")
    expect(
      maps.text
        .trim()
        .split("\n")
        .map((l) => l.trim().split(/\s+/)),
    ).toEqual([
      ["0", "951000", "1"],
      ["0", "951000", "1"],
    ])
  },
  limits: async (id) => ({
    // The period is 100 ms (100 000 µs, local/cgroup.ts): a quota of 100 000 µs is one CPU.
    cpus: Number(cgroupValue(id, "cpu", "cpu.cfs_quota_us")) / 100_000,
    memoryBytes: Number(cgroupValue(id, "memory", "memory.limit_in_bytes")),
    pids: Number(cgroupValue(id, "pids", "pids.max")),
  }),
  // The driver sets no memory-plus-swap limit.
  swapLimit: false,
  pidsCurrent: (id) => Number(cgroupValue(id, "pids", "pids.current")),
})
