/**
 * The firewall of networked sandboxes. Sandboxes with network allowed join the `t1-sandboxes`
 * bridge (no traffic between its containers: enable_icc=false), and Docker's own chains keep
 * them off other networks; but a packet from the bridge to any of this machine's addresses (the
 * bridge's gateway, docker0, the host's LAN address, a service bound to 0.0.0.0) is delivered
 * locally and never meets those chains. The sandbox host therefore drops, in INPUT, everything
 * that arrives on the sandbox bridge (IPv4 and, where ip6tables exists, IPv6): the sandbox still
 * reaches what lies beyond the host (the task's internet), and nothing on the host. Rules carry
 * the comment `t1-sandbox-firewall` and are installed idempotently (checked first), so several
 * hosts on one engine share them; a host removes them when it stops and no sandbox is left on
 * the bridge.
 */
import { execFile } from "node:child_process"
import { Effect } from "effect"
import { SandboxInfraError } from "../errors.ts"

export const FIREWALL_COMMENT = "t1-sandbox-firewall"

/** The rules that keep a bridge's sandboxes off this machine, as iptables arguments. */
export const firewallRules = (bridge: string): ReadonlyArray<ReadonlyArray<string>> => [
  ["INPUT", "-i", bridge, "-m", "comment", "--comment", FIREWALL_COMMENT, "-j", "DROP"],
]

interface Run {
  readonly code: number
  readonly stderr: string
}

const run = (bin: string, args: ReadonlyArray<string>): Promise<Run> =>
  new Promise((resolve) => {
    execFile(bin, [...args], { timeout: 10_000 }, (error, _stdout, stderr) => {
      if (error === null) return resolve({ code: 0, stderr })
      const code = typeof error.code === "number" ? error.code : -1
      resolve({ code, stderr: stderr || error.message })
    })
  })

let probed: Promise<string[]> | undefined

/** The iptables binaries that answer here (probed once): iptables always, ip6tables where it works. */
const binaries = (): Promise<string[]> => {
  // A failed probe (not root yet, say) is tried again next time.
  probed ??= probe().catch((e: unknown) => {
    probed = undefined
    throw e
  })
  return probed
}

const probe = async (): Promise<string[]> => {
  const found: string[] = []
  for (const bin of ["iptables", "ip6tables"]) {
    const probe = await run(bin, ["-w", "-S", "INPUT"])
    if (probe.code === 0) found.push(bin)
    else if (bin === "iptables")
      throw new Error(
        `iptables -S INPUT failed (${probe.stderr.trim()}): the sandbox host must run as root on the engine's machine with iptables installed to firewall networked sandboxes (or start it with --network-firewall off)`,
      )
  }
  return found
}

let installing: Promise<void> = Promise.resolve()

const install = async (bridge: string): Promise<void> => {
  for (const bin of await binaries())
    for (const rule of firewallRules(bridge)) {
      if ((await run(bin, ["-w", "-C", ...rule])).code === 0) continue
      const added = await run(bin, ["-w", "-I", ...rule])
      if (added.code !== 0) throw new Error(`${bin} -I ${rule.join(" ")}: ${added.stderr.trim()}`)
    }
}

/** Installs the rules of `bridge` where they are missing; fails when iptables cannot. */
export const installFirewall = (bridge: string): Effect.Effect<void, SandboxInfraError> =>
  Effect.tryPromise({
    // One at a time, so that two creates do not both find a rule missing and add it twice.
    try: () => {
      const done = installing.then(() => install(bridge))
      installing = done.catch(() => {})
      return done
    },
    catch: (e) =>
      new SandboxInfraError({
        operation: "firewall sandbox network",
        reason: e instanceof Error ? e.message : String(e),
      }),
  })

/** Removes every copy of the rules of `bridge` (best effort: a rule already gone is fine). */
export const removeFirewall = (bridge: string): Effect.Effect<void> =>
  Effect.promise(async () => {
    for (const bin of ["iptables", "ip6tables"])
      for (const rule of firewallRules(bridge))
        for (let i = 0; i < 16 && (await run(bin, ["-w", "-D", ...rule])).code === 0; i++);
  })

/** Whether the rules of `bridge` are in place (IPv4), for tests and diagnostics. */
export const firewallInstalled = (bridge: string): Effect.Effect<boolean> =>
  Effect.promise(async () => {
    for (const rule of firewallRules(bridge))
      if ((await run("iptables", ["-w", "-C", ...rule])).code !== 0) return false
    return true
  })

/** The Linux bridge of a Docker bridge network: its bridge.name option, else br-<id 12>. */
export const bridgeName = (network: {
  readonly Id: string
  readonly Options?: Readonly<Record<string, string>> | null
}): string => network.Options?.["com.docker.network.bridge.name"] ?? `br-${network.Id.slice(0, 12)}`
