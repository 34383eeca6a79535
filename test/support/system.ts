/**
 * The whole system as separate processes, the way an operator runs it: `t1 gateway` and
 * `t1 actor <name>` each in its own process on one NATS server and one subject prefix, every
 * one with its own /metrics port. Tests start it, kill and restart members, and read their
 * output and metrics.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { appendFileSync, mkdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePort } from "./nats-server.ts"

const BIN = new URL("../../cli/bin/t1.js", import.meta.url).pathname

// One free-port helper for all test support: the NATS server helper's.
export { freePort } from "./nats-server.ts"

export interface MemberSpec {
  /** Unique within the system, e.g. "sampler-1". */
  readonly name: string
  /** Arguments after `t1`, e.g. ["actor", "sampler", "--concurrency", "4"]. */
  readonly args: ReadonlyArray<string>
  /** Environment of this member on top of the system's, e.g. DOCKER_HOST. */
  readonly env?: Readonly<Record<string, string>>
}

export interface Member {
  readonly spec: MemberSpec
  readonly metricsPort: number
  child: ChildProcess
  output: string
}

export interface System {
  readonly prefix: string
  readonly natsUrl: string
  /** Where each member's output is written (`<name>.log`). */
  readonly logDir: string
  readonly members: Map<string, Member>
  /** Starts a member and waits until its /healthz answers. */
  start(spec: MemberSpec): Promise<Member>
  /** Sends the signal and waits for the process to exit; returns its exit code. */
  stop(name: string, signal?: NodeJS.Signals): Promise<number | null>
  /** Starts a stopped member again with the same arguments and metrics port. */
  restart(name: string): Promise<Member>
  metrics(name: string): Promise<string>
  /** SIGTERM to every member still running. */
  shutdown(): Promise<void>
  /** Every member's output, for a failure message. */
  dump(): string
}

const waitHealthy = async (member: Member, timeoutMs: number) => {
  const until = Date.now() + timeoutMs
  for (;;) {
    if (member.child.exitCode !== null)
      throw new Error(
        `${member.spec.name} exited with ${member.child.exitCode}:\n${member.output.slice(-4000)}`,
      )
    try {
      const res = await fetch(`http://127.0.0.1:${member.metricsPort}/healthz`)
      if (res.ok) return
    } catch {
      // not listening yet
    }
    if (Date.now() > until)
      throw new Error(`${member.spec.name} not healthy in ${timeoutMs} ms:\n${member.output}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

export const startSystem = (options: {
  readonly natsUrl: string
  readonly prefix: string
  readonly env?: Readonly<Record<string, string>>
}): System => {
  const members = new Map<string, Member>()
  // Every member's whole output also goes to a file, to read while a long test runs.
  const logDir = join(tmpdir(), `t1-system-${options.prefix}`)
  mkdirSync(logDir, { recursive: true })
  const launch = (spec: MemberSpec, metricsPort: number): Member => {
    const child = spawn(
      process.execPath,
      [
        BIN,
        ...spec.args,
        "--nats",
        options.natsUrl,
        "--prefix",
        options.prefix,
        "--metrics-port",
        String(metricsPort),
      ],
      {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, T1_LOG_FORMAT: "logfmt", ...options.env, ...spec.env },
      },
    )
    const member: Member = { spec, metricsPort, child, output: "" }
    const append = (d: Buffer) => {
      appendFileSync(join(logDir, `${spec.name}.log`), d)
      member.output += d.toString()
      // Keep the tail only: a long run logs a lot.
      if (member.output.length > 400_000) member.output = member.output.slice(-200_000)
    }
    child.stdout?.on("data", append)
    child.stderr?.on("data", append)
    members.set(spec.name, member)
    return member
  }
  const stop = async (name: string, signal: NodeJS.Signals = "SIGTERM") => {
    const member = members.get(name)
    if (member === undefined) throw new Error(`no member ${name}`)
    if (member.child.exitCode !== null || member.child.signalCode !== null)
      return member.child.exitCode
    const exited = once(member.child, "exit")
    member.child.kill(signal)
    const [code] = (await exited) as [number | null]
    return code
  }
  return {
    prefix: options.prefix,
    natsUrl: options.natsUrl,
    logDir,
    members,
    start: async (spec) => {
      const member = launch(spec, await freePort())
      await waitHealthy(member, 120_000)
      return member
    },
    stop,
    restart: async (name) => {
      const old = members.get(name)
      if (old === undefined) throw new Error(`no member ${name}`)
      const member = launch(old.spec, old.metricsPort)
      member.output = `${old.output}\n---- restarted ----\n`
      await waitHealthy(member, 120_000)
      return member
    },
    metrics: async (name) => {
      const member = members.get(name)
      if (member === undefined) throw new Error(`no member ${name}`)
      const res = await fetch(`http://127.0.0.1:${member.metricsPort}/metrics`)
      return res.text()
    },
    shutdown: async () => {
      await Promise.all(
        [...members.keys()].map(async (name) => {
          // SIGKILL whoever has not exited 15 s after SIGTERM; the timer must not outlive it.
          const fallback = setTimeout(() => void stop(name, "SIGKILL"), 15_000)
          try {
            await stop(name)
          } finally {
            clearTimeout(fallback)
          }
        }),
      )
    },
    dump: () =>
      [...members.values()].map((m) => `==== ${m.spec.name}\n${m.output.slice(-6000)}`).join("\n"),
  }
}

/** The value of a counter or gauge (summed over its label sets) in a /metrics text. */
export const metricValue = (text: string, name: string): number => {
  let sum = 0
  let seen = false
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)/.exec(line)
    if (match === null || match[1] !== name) continue
    sum += Number(match[3])
    seen = true
  }
  return seen ? sum : Number.NaN
}

/**
 * The actors of a job's path but its samplers, each a process: the gateway on `listen`, a
 * coordinator, a docker sandbox host labelled `owner`, a verifier, a buffer and a learner pool
 * (short leases, so a test's replacements take over quickly).
 */
export const coreMembers = (listen: string, owner: string): MemberSpec[] => [
  { name: "gateway", args: ["gateway", "--listen", listen] },
  { name: "coordinator", args: ["actor", "coordinator", "--lease-ttl-ms", "3000"] },
  {
    name: "sandbox",
    args: ["actor", "sandbox", "--driver", "docker", "--owner", owner, "--concurrency", "8"],
  },
  { name: "verifier", args: ["actor", "verifier", "--concurrency", "4"] },
  { name: "buffer", args: ["actor", "buffer", "--lease-ttl-ms", "3000"] },
  { name: "learner", args: ["actor", "learner", "--lease-ttl-ms", "3000"] },
]
