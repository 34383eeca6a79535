import { execFile } from "node:child_process"
import { randomInt } from "node:crypto"
import { existsSync } from "node:fs"
import { Effect } from "effect"
import { installFirewall } from "../docker/firewall.ts"
import { DEFAULT_PATH } from "../local/isolation.ts"

/**
 * The network of bwrap sandboxes whose spec allows network, as Docker gives its networked
 * sandboxes: each its own network namespace, joined by a veth pair to the host bridge
 * BWRAP_BRIDGE (its port isolated: no traffic between sandboxes), its traffic to the outside
 * masqueraded, and everything it sends to this machine dropped (docker/firewall.ts on the
 * bridge). Sandboxes without network get a namespace of their own with loopback only (bwrap).
 */
export const BWRAP_BRIDGE = "t1bw0"
export const BWRAP_SUBNET = "10.213.0.0/16"
export const BWRAP_GATEWAY = "10.213.0.1"
const COMMENT = "t1-bwrap-network"

const run = (file: string, args: ReadonlyArray<string>, input?: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = execFile(
      file,
      [...args],
      { timeout: 10_000, env: { PATH: DEFAULT_PATH } },
      (error, stdout, stderr) => {
        if (error === null) resolve(String(stdout))
        else
          reject(new Error(`${file} ${args.join(" ")}: ${String(stderr).trim() || error.message}`))
      },
    )
    if (input !== undefined) child.stdin?.end(input)
  })

const NAT: ReadonlyArray<ReadonlyArray<string>> = [
  ["-t", "nat", "POSTROUTING", "-s", BWRAP_SUBNET, "!", "-o", BWRAP_BRIDGE, "-j", "MASQUERADE"],
  ["FORWARD", "-i", BWRAP_BRIDGE, "!", "-o", BWRAP_BRIDGE, "-j", "ACCEPT"],
  [
    "FORWARD",
    "-o",
    BWRAP_BRIDGE,
    "-m",
    "conntrack",
    "--ctstate",
    "RELATED,ESTABLISHED",
    "-j",
    "ACCEPT",
  ],
]

/** iptables arguments of a rule (its table first where it names one), with the comment. */
const ruleArgs = (rule: ReadonlyArray<string>, action: "-C" | "-I") => {
  const table = rule[0] === "-t" ? rule.slice(0, 2) : []
  const [chain = "", ...match] = rule.slice(table.length)
  return ["-w", ...table, action, chain, ...match, "-m", "comment", "--comment", COMMENT]
}

let bridgeReady: Promise<void> | undefined

const setUpBridge = async () => {
  if (!existsSync(`/sys/class/net/${BWRAP_BRIDGE}`)) {
    await run("ip", ["link", "add", BWRAP_BRIDGE, "type", "bridge"]).catch((e: unknown) => {
      if (!existsSync(`/sys/class/net/${BWRAP_BRIDGE}`)) throw e
    })
  }
  const addresses = await run("ip", ["-o", "-4", "addr", "show", "dev", BWRAP_BRIDGE])
  if (!addresses.includes(`${BWRAP_GATEWAY}/`))
    await run("ip", ["addr", "add", `${BWRAP_GATEWAY}/16`, "dev", BWRAP_BRIDGE])
  await run("ip", ["link", "set", BWRAP_BRIDGE, "up"])
  await run("sysctl", ["-q", "-w", "net.ipv4.ip_forward=1"])
  for (const rule of NAT) {
    const present = await run("iptables", ruleArgs(rule, "-C")).then(
      () => true,
      () => false,
    )
    if (!present) await run("iptables", ruleArgs(rule, "-I"))
  }
}

/**
 * The bridge, its NAT and its firewall, made where missing; the firewall is checked on every
 * call (another process may have removed it).
 */
export const ensureBwrapBridge = (): Effect.Effect<void, Error> =>
  Effect.gen(function* () {
    yield* Effect.tryPromise({
      try: () => {
        bridgeReady ??= setUpBridge().catch((e: unknown) => {
          bridgeReady = undefined
          throw e
        })
        return bridgeReady
      },
      catch: (e) => (e instanceof Error ? e : new Error(String(e))),
    })
    yield* installFirewall(BWRAP_BRIDGE).pipe(Effect.mapError((e) => new Error(e.message)))
  })

/** The network namespace of networked sandbox `id` (a name under /run/netns). */
export const netnsName = (id: string) => `t1-${id}`
export const netnsPath = (id: string) => `/run/netns/${netnsName(id)}`

/** A free address of the subnet: not the gateway, not one of `taken`. */
export const freeAddress = (taken: ReadonlySet<string>): string => {
  for (let attempt = 0; attempt < 1000; attempt++) {
    const address = `10.213.${randomInt(0, 256)}.${randomInt(1, 255)}`
    if (address !== BWRAP_GATEWAY && !taken.has(address)) return address
  }
  throw new Error(`no free address left in ${BWRAP_SUBNET}`)
}

/**
 * Makes sandbox `id`'s network namespace: eth0 on the bridge, an address none of `taken` (the
 * addresses of the other networked sandboxes), the default route.
 */
export const makeSandboxNetwork = async (
  id: string,
  taken: ReadonlySet<string>,
): Promise<{ readonly address: string }> => {
  const name = netnsName(id)
  const hostSide = `tb${id.slice(-10)}`.slice(0, 15)
  const address = freeAddress(taken)
  await run("ip", ["netns", "add", name])
  try {
    await run("ip", [
      "link",
      "add",
      hostSide,
      "type",
      "veth",
      "peer",
      "name",
      "eth0",
      "netns",
      name,
    ])
    await run("ip", ["link", "set", "dev", hostSide, "master", BWRAP_BRIDGE, "up"])
    // An isolated port talks only to the bridge's non-isolated ports: not to other sandboxes.
    await run("bridge", ["link", "set", "dev", hostSide, "isolated", "on"])
    await run(
      "ip",
      ["-n", name, "-batch", "-"],
      [
        `addr add ${address}/16 dev eth0`,
        "link set lo up",
        "link set eth0 up",
        `route add default via ${BWRAP_GATEWAY}`,
      ].join("\n"),
    )
  } catch (e) {
    await removeSandboxNetwork(id)
    throw e
  }
  return { address }
}

/** Removes sandbox `id`'s network namespace (and with it its veth pair); missing is fine. */
export const removeSandboxNetwork = async (id: string): Promise<void> => {
  if (!existsSync(netnsPath(id))) return
  await run("ip", ["netns", "del", netnsName(id)]).catch(() => undefined)
}
