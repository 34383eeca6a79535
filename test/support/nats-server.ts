import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer, Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** A nats-server with JetStream that a test owns: its own port and on-disk store. */
export interface NatsServerProcess {
  readonly url: string
  readonly port: number
  readonly storeDir: string
  /** SIGKILL: no chance to flush or say goodbye, like a crash. */
  readonly kill: () => Promise<void>
  /** Start again on the same port and store. */
  readonly restart: () => Promise<void>
  readonly stop: () => Promise<void>
}

const binary = process.env.T1_NATS_SERVER_BIN ?? "nats-server"

export const natsServerAvailable = (): boolean =>
  spawnSync(binary, ["--version"], { stdio: "ignore" }).status === 0

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const srv = createServer()
    srv.unref()
    srv.on("error", reject)
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      srv.close(() => resolve(port))
    })
  })

const waitForPort = async (port: number, deadlineMs: number): Promise<void> => {
  const until = Date.now() + deadlineMs
  while (Date.now() < until) {
    const open = await new Promise<boolean>((resolve) => {
      const s = new Socket()
      s.once("connect", () => {
        s.destroy()
        resolve(true)
      })
      s.once("error", () => resolve(false))
      s.connect(port, "127.0.0.1")
    })
    if (open) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`nats-server did not listen on 127.0.0.1:${port} within ${deadlineMs} ms`)
}

export const startNatsServer = async (
  options: { readonly args?: ReadonlyArray<string> } = {},
): Promise<NatsServerProcess> => {
  if (!natsServerAvailable()) {
    throw new Error(
      `${binary} not found: install it (apt-get install nats-server) or set T1_TEST_NATS_URL`,
    )
  }
  const port = await freePort()
  const storeDir = mkdtempSync(join(tmpdir(), "t1-nats-"))
  let child: ChildProcess | undefined
  const launch = async () => {
    const args = [
      "-a",
      "127.0.0.1",
      "-p",
      String(port),
      "-js",
      "-sd",
      storeDir,
      ...(options.args ?? []),
    ]
    child = spawn(binary, args, { stdio: "ignore" })
    await waitForPort(port, 10_000)
  }
  const exited = (c: ChildProcess | undefined) =>
    new Promise<void>((resolve) => {
      if (c === undefined || c.exitCode !== null || c.signalCode !== null) return resolve()
      c.once("exit", () => resolve())
    })
  await launch()
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    kill: async () => {
      const c = child
      c?.kill("SIGKILL")
      await exited(c)
    },
    restart: launch,
    stop: async () => {
      const c = child
      c?.kill("SIGTERM")
      await exited(c)
      rmSync(storeDir, { recursive: true, force: true })
    },
  }
}
