import { spawn } from "node:child_process"
import { once } from "node:events"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freePort, type NatsServerProcess, startNatsServer } from "../support/nats-server.ts"

const BIN = new URL("../../cli/bin/t1.js", import.meta.url).pathname

interface Done {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const t1 = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, T1_NATS_URL: "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (d: Buffer) => {
    stdout += d.toString()
  })
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString()
  })
  const done = once(child, "exit").then(
    ([code]): Done => ({ code: code as number | null, stdout, stderr }),
  )
  return { child, done, output: () => stdout + stderr }
}

const waitFor = async (what: () => boolean, ms: number) => {
  const until = Date.now() + ms
  while (!what()) {
    if (Date.now() > until) throw new Error("condition not met in time")
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe("t1 CLI", () => {
  let nats: NatsServerProcess
  let url = process.env.T1_TEST_NATS_URL ?? ""
  beforeAll(async () => {
    if (url === "") {
      nats = await startNatsServer()
      url = nats.url
    }
  })
  afterAll(async () => {
    await nats?.stop()
  })

  it("prints help and exits 0", async () => {
    const r = await t1(["--help"]).done
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("Usage: t1 <command>")
  })

  it.concurrent.each([
    [["frob"], "unknown command"],
    [["actor", "--bogus"], "Unknown option '--bogus'"],
    [["actor"], "which actor? name one first"],
    [["actor", "nope"], 'unknown actor "nope"'],
    // The learner's pool flags are its own: a buffer would ignore them.
    [["actor", "buffer", "--format", "shell-block"], "Unknown option '--format'"],
    [["actor", "buffer", "--batch-wait-ms", "10"], "Unknown option '--batch-wait-ms'"],
    [["actor", "learner", "--format", "bogus"], "--format must be shell-block"],
    [["actor", "diagnostic", "--concurrency", "0"], "--concurrency must be an integer >= 1"],
    [["actor", "diagnostic", "--nats", "http://x"], "is not a NATS URL"],
    [["ping", "--timeout-ms", "soon"], "--timeout-ms must be an integer"],
  ])("rejects bad usage %j with a message, the usage and exit code 2", async (args, message) => {
    const r = await t1(args).done
    expect(r.code).toBe(2)
    expect(r.stderr).toContain(message)
    expect(r.stderr).toContain("Usage: t1")
  })

  it("reports an unreachable NATS clearly after retrying, without a stack trace", async () => {
    const port = await freePort()
    const r = await t1([
      "ping",
      "--nats",
      `nats://127.0.0.1:${port}`,
      "--nats-connect-attempts",
      "2",
    ]).done
    expect(r.code).toBe(1)
    expect(r.stderr).toContain(`t1: NATS at nats://127.0.0.1:${port} is unreachable`)
    expect(r.stderr).toContain("retrying (attempt 2 of 2)")
    expect(r.stderr).not.toMatch(/\n\s+at /)
  })

  it("hosts an actor that answers ping, serves metrics, and drains on SIGTERM", async () => {
    const actor = t1([
      "actor",
      "diagnostic",
      "--nats",
      url,
      "--metrics-port",
      "0",
      "--concurrency",
      "2",
    ])
    await waitFor(() => actor.output().includes("taking messages"), 15_000)
    const metricsUrl = /metrics at (http:\/\/\S+)/.exec(actor.output())?.[1]
    const ping = await t1(["ping", "--nats", url, "--json", "--count", "2"]).done
    expect(ping.code).toBe(0)
    const pongs = ping.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { actor: string })
    expect(pongs.map((p) => p.actor)).toEqual(["diagnostic", "diagnostic"])
    const metrics = await (await fetch(metricsUrl ?? "")).text()
    expect(metrics).toMatch(/t1_actor_messages_total\{actor="diagnostic",outcome="ok"\} 2/)
    expect(metrics).toContain("t1_bus_messages_total")
    expect(metrics).toContain("t1_process_resident_memory_bytes")
    actor.child.kill("SIGTERM")
    const r = await actor.done
    expect(r.code).toBe(0)
    expect(r.stdout + r.stderr).toContain("stopped taking work")
  })
})
