import { spawn } from "node:child_process"
import { once } from "node:events"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as grpc from "@grpc/grpc-js"
import { afterAll, describe, expect, it } from "vitest"
import { gatewayCommand, parseListen } from "../../cli/commands/gateway.ts"
import { UsageError } from "../../cli/flags.ts"
import { JobKind, JobState } from "../../proto/index.ts"
import { useNatsServer } from "../../test/support/nats-url.ts"
import { parseTokens } from "./auth.ts"
import { jobServiceClient } from "./client.ts"

const BIN = new URL("../../cli/bin/t1.js", import.meta.url).pathname
const nats = useNatsServer()
const scratch = mkdtempSync(join(tmpdir(), "t1-gateway-cli-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe("t1 gateway", () => {
  it("parses tokens files and rejects bad flags with usage errors", () => {
    const tokens = parseTokens("# ops\nsecret-a admin\n\nsecret-r reader # dashboards\n")
    expect([...tokens]).toEqual([
      ["secret-a", { role: "admin" }],
      ["secret-r", { role: "reader" }],
    ])
    expect(() => parseTokens("x owner", "f")).toThrow("f:1: role must be admin or reader")
    expect(() => parseTokens("x admin\nx reader", "f")).toThrow("f:2: token listed twice")
    expect(parseListen("[::1]:50051", "")).toEqual({ host: "::1", port: 50051 })
    expect(gatewayCommand(["--help"])).toContain("--tokens-file FILE")
    expect(() => gatewayCommand(["--listen", "localhost"])).toThrow(UsageError)
    expect(() => gatewayCommand(["--listen", "0.0.0.0:70000"])).toThrow(/HOST:PORT/)
    expect(() => gatewayCommand(["--tls-cert", "c.pem"])).toThrow(/go together/)
    const bad = join(scratch, "bad-tokens")
    writeFileSync(bad, "only-a-token\n")
    expect(() => gatewayCommand(["--tokens-file", bad])).toThrow(/expected `TOKEN ROLE`/)
  })

  it("serves jobs until SIGTERM, then exits 0", async () => {
    const tokensFile = join(scratch, "tokens")
    writeFileSync(tokensFile, "cli-admin admin\n")
    const child = spawn(
      process.execPath,
      [
        BIN,
        "gateway",
        "--listen",
        "127.0.0.1:0",
        "--metrics-port",
        "0",
        "--tokens-file",
        tokensFile,
        "--nats",
        nats.url,
        "--prefix",
        `cli${process.pid}`,
        "--log-format",
        "logfmt",
      ],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, T1_NATS_URL: "" } },
    )
    let output = ""
    child.stdout.on("data", (d: Buffer) => {
      output += d.toString()
    })
    child.stderr.on("data", (d: Buffer) => {
      output += d.toString()
    })
    const exited = once(child, "exit")
    const until = Date.now() + 20_000
    let address: string | undefined
    while (address === undefined) {
      address = /serving .* on (127\.0\.0\.1:\d+)/.exec(output)?.[1]
      if (Date.now() > until || child.exitCode !== null) throw new Error(`no address:\n${output}`)
      await new Promise((r) => setTimeout(r, 50))
    }
    const client = jobServiceClient(address, { token: "cli-admin" })
    const { jobId, status } = await client.submitJob({
      spec: { kind: JobKind.EVAL, taskSet: "bundled-eval" },
    })
    expect(status?.state).toBe(JobState.PENDING)
    expect((await client.getJob({ jobId })).status?.jobId).toBe(jobId)
    const anonymous = await jobServiceClient(address)
      .getJob({ jobId })
      .catch((e: { code: number }) => e)
    expect(anonymous).toMatchObject({ code: grpc.status.UNAUTHENTICATED })
    client.close()
    child.kill("SIGTERM")
    const [code] = await exited
    expect(code).toBe(0)
    expect(output).toContain("gateway: stopped")
  })
})
