import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { once } from "node:events"
import Dockerode from "dockerode"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SandboxNotFound, SandboxRequestFailed, sandboxClient } from "../../actors/sandbox/index.ts"
import { Bus, type BusShape, NatsBusLive, subjectsFor } from "../../services/bus/index.ts"
import { type NatsServerProcess, startNatsServer } from "../support/nats-server.ts"

const BIN = new URL("../../cli/bin/t1.js", import.meta.url).pathname

const startHost = (url: string, owner: string, prefix: string) => {
  const child = spawn(
    process.execPath,
    [
      BIN,
      "actor",
      "sandbox",
      "--driver",
      "docker",
      "--owner",
      owner,
      "--nats",
      url,
      "--prefix",
      prefix,
      "--metrics-port",
      "0",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  )
  let output = ""
  child.stdout.on("data", (d: Buffer) => {
    output += d.toString()
  })
  child.stderr.on("data", (d: Buffer) => {
    output += d.toString()
  })
  const ready = async () => {
    const until = Date.now() + 30_000
    while (!output.includes(`taking messages from ${prefix}.sandbox.create`)) {
      if (Date.now() > until || child.exitCode !== null)
        throw new Error(`sandbox host did not start:\n${output}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  return { child, ready, output: () => output }
}

describe("sandbox host process (docker engine, NATS)", () => {
  let nats: NatsServerProcess
  let bus: BusShape
  let close: () => Promise<void>
  const docker = new Dockerode()
  const prefix = `e2e${randomUUID().slice(0, 6)}`
  const subjects = subjectsFor(prefix)

  beforeAll(async () => {
    nats = await startNatsServer()
    const scope = await Effect.runPromise(Scope.make())
    const context = await Effect.runPromise(
      Layer.buildWithScope(NatsBusLive({ servers: nats.url, name: "e2e-client" }), scope),
    )
    bus = Context.get(context, Bus)
    close = () => Effect.runPromise(Scope.close(scope, Exit.void))
  })
  afterAll(async () => {
    await close?.()
    await nats?.stop()
  })

  it("reports a killed container as an infra error and reaps a dead host's orphans at restart", async () => {
    const owner = `e2e-${randomUUID().slice(0, 8)}`
    const client = sandboxClient(bus, subjects)
    const first = startHost(nats.url, owner, prefix)
    await first.ready()

    const a = await Effect.runPromise(client.create({ workdir: "/app" }))
    const hello = await Effect.runPromise(client.exec(a.sandboxId, "echo hello from $PWD"))
    expect(new TextDecoder().decode(hello.output)).toBe("hello from /app\n")

    // Killed from outside: the next command is an infra failure, retryable elsewhere.
    const b = await Effect.runPromise(client.create({ workdir: "/app" }))
    await docker.getContainer(b.sandboxId).kill()
    const died = await Effect.runPromise(Effect.flip(client.exec(b.sandboxId, "true")))
    expect(died).toBeInstanceOf(SandboxRequestFailed)
    expect((died as SandboxRequestFailed).retryable).toBe(true)

    // The host dies without cleaning up: its container stays, nobody serves it.
    first.child.kill("SIGKILL")
    await once(first.child, "exit")
    const orphan = await docker.getContainer(a.sandboxId).inspect()
    expect(orphan.Config.Labels["t1.owner"]).toBe(owner)
    const unserved = await Effect.runPromise(Effect.flip(client.exec(a.sandboxId, "true")))
    expect(unserved).toBeInstanceOf(SandboxNotFound)

    // The same host comes back: what it owned before is an orphan and is removed at start-up.
    const second = startHost(nats.url, owner, prefix)
    await second.ready()
    await expect(docker.getContainer(a.sandboxId).inspect()).rejects.toMatchObject({
      statusCode: 404,
    })
    expect(second.output()).toContain(`removed orphan sandbox ${a.sandboxId}`)
    second.child.kill("SIGTERM")
    const [code] = await once(second.child, "exit")
    expect(code).toBe(0)
  }, 90_000)
})
