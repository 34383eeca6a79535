/**
 * `t1 serve` as a user runs it: one process, in-memory bus, the Docker driver; jobs go in through
 * the gRPC client and the CLI, and come out as events, statuses and /metrics.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { once } from "node:events"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type JobEvent, JobKind, JobState } from "../../proto/index.ts"
import { type JobServiceClient, jobServiceClient } from "../../services/gateway/client.ts"
import { freePort, metricValue } from "../support/system.ts"

const BIN = fileURLToPath(new URL("../../cli/bin/t1.js", import.meta.url))
const EVAL_DIR = fileURLToPath(new URL("../../tasks/bundled/eval", import.meta.url))
const TRAIN_DIR = fileURLToPath(new URL("../../tasks/bundled/train", import.meta.url))
const run = promisify(execFile)

const quick = {
  sampling: { temperature: 1, topP: 1, maxTokens: 24 },
  limits: { maxTurns: 2, wallClockSec: 120 },
}

const evalSpec = {
  name: "serve eval",
  kind: JobKind.EVAL,
  taskSet: EVAL_DIR,
  taskIds: ["json-merge-easy-s1000000-000", "log-report-easy-s1000002-000"],
  samplesPerTask: 2,
  policyRef: "tinymoe:init",
  ...quick,
}

const follow = async (client: JobServiceClient, jobId: string) => {
  const events: JobEvent[] = []
  for await (const event of client.watchJob({ jobId, fromSeq: 1n })) events.push(event)
  return events
}

describe("t1 serve (one process, gRPC client, Docker)", () => {
  let serve: ChildProcess
  let output = ""
  let listen = ""
  let metricsPort = 0
  let client: JobServiceClient
  let stopping = false

  beforeAll(async () => {
    listen = `127.0.0.1:${await freePort()}`
    metricsPort = await freePort()
    serve = spawn(
      process.execPath,
      [BIN, "serve", "--listen", listen, "--metrics-port", String(metricsPort)],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, T1_LOG_FORMAT: "logfmt" } },
    )
    serve.stdout?.on("data", (d: Buffer) => {
      output += d.toString()
    })
    serve.stderr?.on("data", (d: Buffer) => {
      output += d.toString()
    })
    // A server that dies under the tests fails them with connection errors: say why it died.
    serve.once("exit", (code, signal) => {
      if (!stopping)
        process.stderr.write(`t1 serve exited (${code ?? signal}) during the tests:\n${output}\n`)
    })
    const until = Date.now() + 180_000
    for (;;) {
      if (serve.exitCode !== null) throw new Error(`t1 serve exited:\n${output}`)
      if (/JobService on /.test(output)) break
      if (Date.now() > until) throw new Error(`t1 serve not up in 180 s:\n${output}`)
      await new Promise((r) => setTimeout(r, 200))
    }
    client = jobServiceClient(listen, { timeoutMs: 10_000 })
  }, 200_000)

  afterAll(async () => {
    stopping = true
    client?.close()
    if (serve !== undefined && serve.exitCode === null) {
      serve.kill("SIGKILL")
      await once(serve, "exit")
    }
  })

  it("runs an eval job submitted over gRPC to SUCCEEDED, every episode an event", async () => {
    const { jobId } = await client.submitJob({
      spec: evalSpec,
      requestId: "serve-e2e-eval",
    })
    const events = await follow(client, jobId)
    const { status } = await client.getJob({ jobId })
    expect(status?.state, output.slice(-4000)).toBe(JobState.SUCCEEDED)
    const finished = events.filter((e) => e.event.case === "episodeFinished")
    expect(finished).toHaveLength(4)
    expect(events.some((e) => e.event.case === "evaluation")).toBe(true)
    // The retried submit (same request id) is the same job, not a second one.
    const again = await client.submitJob({
      spec: evalSpec,
      requestId: "serve-e2e-eval",
    })
    expect(again.jobId).toBe(jobId)
  }, 300_000)

  it("trains: learner steps arrive as events and the job ends at its step budget", async () => {
    const { jobId } = await client.submitJob({
      spec: {
        name: "serve train",
        kind: JobKind.TRAIN,
        taskSet: TRAIN_DIR,
        taskIds: ["config-edit-easy-s1-000", "json-report-easy-s0-000"],
        samplesPerTask: 2,
        maxConcurrentEpisodes: 4,
        learner: { batchTrajectories: 4, ppoSteps: 1, maxStaleness: 1, criticWarmupSteps: 0 },
        ...quick,
      },
    })
    const events = await follow(client, jobId)
    const { status } = await client.getJob({ jobId })
    expect(status?.state, output.slice(-4000)).toBe(JobState.SUCCEEDED)
    expect(events.filter((e) => e.event.case === "learnerStep")).toHaveLength(1)
    expect(status?.policyVersion).toBe(1n)
  }, 400_000)

  it("t1 eval --watch against it prints the summary; /metrics counts the episodes", async () => {
    const { stdout } = await run(
      process.execPath,
      [
        BIN,
        "eval",
        "--gateway",
        listen,
        "--task-set",
        EVAL_DIR,
        "--task-ids",
        "script-tool-easy-s1000001-000",
        "--max-turns",
        "1",
        "--watch",
      ],
      { timeout: 240_000 },
    )
    expect(stdout).toMatch(/resolved rate \d+\.\d% \(1 episodes over 1 tasks/)
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
    expect(metricValue(text, "t1_sampler_episodes_total")).toBeGreaterThanOrEqual(9)
  }, 300_000)

  it("stops cleanly on SIGTERM", async () => {
    const exited = once(serve, "exit")
    serve.kill("SIGTERM")
    const [code] = (await exited) as [number | null]
    expect(code, output.slice(-4000)).toBe(0)
  }, 60_000)
})

describe("t1 serve bad input", () => {
  it.each([
    [["--listen", "nope"], /--listen must be HOST:PORT/],
    [["--driver", "podman"], /--driver must be one of auto, bwrap, docker, local/],
    [["--concurrency", "0"], /--concurrency/],
    [["extra"], /unexpected arguments: extra/],
  ])("%j is refused with exit 2", async (args, message) => {
    const result = await run(process.execPath, [BIN, "serve", ...args]).then(
      () => ({ code: 0, stderr: "" }),
      (e: { code: number; stderr: string }) => e,
    )
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(message)
  })

  it("says how to start a Docker engine when none answers", async () => {
    const result = await run(process.execPath, [BIN, "serve", "--metrics-port", "0"], {
      env: { ...process.env, DOCKER_HOST: "unix:///nonexistent/t1-docker.sock" },
    }).then(
      () => ({ code: 0, stderr: "" }),
      (e: { code: number; stderr: string }) => e,
    )
    expect(result.code).not.toBe(0)
    expect(result.stderr).toMatch(/no Docker engine answers at unix:\/\/\/nonexistent/)
    expect(result.stderr).toMatch(/dockerd/)
  })

  it("--driver bwrap where bwrap cannot run exits 1 before anything starts, with the reason and the fix", async () => {
    const result = await run(
      process.execPath,
      [BIN, "serve", "--driver", "bwrap", "--metrics-port", "0"],
      { env: { ...process.env, T1_BWRAP: "/nonexistent/bwrap" } },
    ).then(
      () => ({ code: 0, stderr: "" }),
      (e: { code: number; stderr: string }) => e,
    )
    expect(result.code).toBe(1)
    expect(result.stderr).toMatch(
      /t1 serve: --driver bwrap: bwrap is not installed \(no executable \/nonexistent\/bwrap\); fix: install the package bubblewrap/,
    )
    expect(result.stderr).not.toMatch(/JobService on/)
  })
})
