import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { once } from "node:events"
import { mkdtempSync, rmSync } from "node:fs"
import { Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { makeNatsBus, subjectsFor } from "../../services/bus/index.ts"
import { makeJobStore } from "../../services/jobs/index.ts"
import { type natsFlagSpec, natsOptionsFrom } from "../bus-flags.ts"

const BIN = new URL("../bin/t1.js", import.meta.url).pathname
const ROLES = [
  "ADMIN",
  "GATEWAY",
  "COORDINATOR",
  "SAMPLER",
  "SANDBOX",
  "VERIFIER",
  "BUFFER",
  "LEARNER",
]
const passwords = Object.fromEntries(
  ROLES.map((r) => [`T1_NATS_${r}_PASSWORD`, `p${r.toLowerCase()}${process.pid}`]),
)
const dir = mkdtempSync(join(tmpdir(), "t1-nats-cluster-cmd-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const listening = (url: string) =>
  new Promise<boolean>((resolve) => {
    const s = new Socket()
    s.once("connect", () => {
      s.destroy()
      resolve(true)
    })
    s.once("error", () => resolve(false))
    s.connect(Number(url.split(":").at(-1)), "127.0.0.1")
  })

/** Starts `t1 nats cluster` and resolves with the process and the URL line it prints. */
const startCommand = async (args: ReadonlyArray<string>) => {
  const child: ChildProcess = spawn(process.execPath, [BIN, "nats", "cluster", ...args], {
    env: { ...process.env, ...passwords },
    stdio: ["ignore", "pipe", "pipe"],
  })
  let out = ""
  let err = ""
  child.stderr?.on("data", (d: Buffer) => {
    err += d.toString()
  })
  const urls = await new Promise<string>((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString()
      const line = out.split("\n").find((l) => l.startsWith("nats://"))
      if (line !== undefined && out.includes("\n")) resolve(line.trim())
    })
    child.once("exit", (code) => reject(new Error(`exited ${code}: ${err}`)))
  })
  return { child, urls }
}

describe("t1 nats cluster", () => {
  it("starts three nodes with deploy/nats's roles on every node, prints their URLs, and stops them on SIGTERM", async () => {
    const { child, urls } = await startCommand([
      "--dir",
      dir,
      "--client-port",
      "0",
      "--cluster-port",
      "0",
    ])
    const list = urls.split(",")
    expect(list).toHaveLength(3)
    for (const u of list) expect(u).toMatch(/^nats:\/\/127\.0\.0\.1:\d+$/)

    // A role of deploy/nats/nats-server.conf connects to any node, through the CLI's own flag
    // parsing, and the job store it opens is replicated on all three.
    const gateway = natsOptionsFrom(
      {
        nats: urls,
        "nats-user": "gateway",
        "nats-password": passwords.T1_NATS_GATEWAY_PASSWORD,
        "nats-replicas": "3",
      } satisfies { [K in keyof typeof natsFlagSpec]?: string },
      "usage",
      "t1-test",
    )
    await Effect.runPromise(
      Effect.scoped(
        Effect.flatMap(makeNatsBus(gateway), (bus) => makeJobStore(bus, subjectsFor("t1"))),
      ),
    )
    const nc = await connect({
      servers: list[2],
      user: "admin",
      pass: passwords.T1_NATS_ADMIN_PASSWORD,
    })
    const jsm = await jetstreamManager(nc)
    for (const stream of ["KV_t1-jobs", "T1_JOB_EVENTS"])
      expect((await jsm.streams.info(stream)).config.num_replicas).toBe(3)
    // No user, no connection: the roles' file is in force on every node.
    await expect(connect({ servers: list[1], reconnect: false })).rejects.toThrow(/auth/i)
    await nc.close()

    child.kill("SIGTERM")
    const [code] = await once(child, "exit")
    expect(code).toBe(0)
    for (const u of list) expect(await listening(u)).toBe(false)
  }, 90_000)

  it("refuses a bad port, name or config with its usage", () => {
    for (const args of [
      ["--client-port", "x"],
      ["--cluster-port", "65534"],
      ["--name", "a.b"],
      ["--config", join(dir, "missing.conf")],
      ["--dir"],
    ]) {
      const r = spawnSync(process.execPath, [BIN, "nats", "cluster", ...args], { encoding: "utf8" })
      expect({ args, status: r.status }).toEqual({ args, status: 2 })
      expect(r.stderr).toContain("Usage: t1 nats cluster")
    }
    const r = spawnSync(process.execPath, [BIN, "nats", "start"], { encoding: "utf8" })
    expect(r.status).toBe(2)
    expect(r.stderr).toContain('unknown nats command "start"')
  }, 60_000)
})
