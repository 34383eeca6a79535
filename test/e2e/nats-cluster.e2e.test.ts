/**
 * `t1 serve` on a three-node JetStream cluster with three replicas, the way issue 43 asks a user
 * to run it (`--nats a,b,c --nats-replicas 3`): an eval and a train job run at once while the
 * node leading the job store's raft group is SIGKILLed mid-job and started again; both end
 * SUCCEEDED with every episode and the learner step reported once.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { fileURLToPath } from "node:url"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type JobEvent, JobKind, JobState, type JobStatus } from "../../proto/index.ts"
import { type JobServiceClient, jobServiceClient } from "../../services/gateway/client.ts"
import { startTestNatsCluster, type TestNatsCluster } from "../support/nats-cluster.ts"
import { freePort } from "../support/system.ts"

const BIN = fileURLToPath(new URL("../../cli/bin/t1.js", import.meta.url))
const EVAL_DIR = fileURLToPath(new URL("../../tasks/bundled/eval", import.meta.url))
const TRAIN_DIR = fileURLToPath(new URL("../../tasks/bundled/train", import.meta.url))
const PREFIX = "e2ecluster"

const quick = {
  sampling: { temperature: 1, topP: 1, maxTokens: 24 },
  limits: { maxTurns: 1, wallClockSec: 120 },
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * The server leading a stream's raft group, asked on a connection of the test's own; asked again
 * for 30 s while the cluster elects (JetStream's API does not answer meanwhile).
 */
const leaderOf = async (servers: ReadonlyArray<string>, stream: string): Promise<string> => {
  const until = Date.now() + 30_000
  for (;;) {
    try {
      const nc = await connect({ servers: [...servers], name: "t1-e2e-admin" })
      try {
        const leader = (await (await jetstreamManager(nc)).streams.info(stream)).cluster?.leader
        if (leader !== undefined) return leader
      } finally {
        await nc.close()
      }
    } catch (e) {
      if (Date.now() > until) throw e
    }
    if (Date.now() > until) throw new Error(`${stream} has no leader`)
    await sleep(300)
  }
}

describe("t1 serve on a three-node NATS cluster (R3)", () => {
  let cluster: TestNatsCluster
  let serve: ChildProcess
  let output = ""
  let client: JobServiceClient
  let stopping = false

  beforeAll(async () => {
    cluster = await startTestNatsCluster()
    const listen = `127.0.0.1:${await freePort()}`
    serve = spawn(
      process.execPath,
      [
        BIN,
        "serve",
        "--nats",
        cluster.urls,
        "--nats-replicas",
        "3",
        "--prefix",
        PREFIX,
        "--listen",
        listen,
        "--metrics-port",
        String(await freePort()),
      ],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, T1_LOG_FORMAT: "logfmt" } },
    )
    const append = (d: Buffer) => {
      output += d.toString()
    }
    serve.stdout?.on("data", append)
    serve.stderr?.on("data", append)
    // A server that dies under the test fails it with connection errors: say why it died.
    serve.once("exit", (code, signal) => {
      if (!stopping)
        process.stderr.write(`t1 serve exited (${code ?? signal}) during the test:\n${output}\n`)
    })
    const until = Date.now() + 60_000
    while (!/JobService on /.test(output)) {
      if (serve.exitCode !== null) throw new Error(`t1 serve exited:\n${output}`)
      if (Date.now() > until) throw new Error(`t1 serve not up in 60 s:\n${output}`)
      await sleep(200)
    }
    client = jobServiceClient(listen, { timeoutMs: 10_000 })
  }, 120_000)

  afterAll(async () => {
    stopping = true
    client?.close()
    if (serve !== undefined && serve.exitCode === null) {
      serve.kill("SIGKILL")
      await once(serve, "exit")
    }
    await cluster?.close()
  })

  it("runs an eval and a train job to SUCCEEDED while the job store's leader node is killed", async () => {
    const { jobId: evalId } = await client.submitJob({
      spec: {
        name: "cluster eval",
        kind: JobKind.EVAL,
        taskSet: EVAL_DIR,
        taskIds: ["json-merge-easy-s1000000-000"],
        samplesPerTask: 2,
        policyRef: "tinymoe:init",
        ...quick,
      },
    })
    const { jobId: trainId } = await client.submitJob({
      spec: {
        name: "cluster train",
        kind: JobKind.TRAIN,
        taskSet: TRAIN_DIR,
        taskIds: ["config-edit-easy-s1-000"],
        samplesPerTask: 2,
        maxConcurrentEpisodes: 2,
        learner: { batchTrajectories: 2, ppoSteps: 1, maxStaleness: 1, criticWarmupSteps: 0 },
        ...quick,
      },
    })
    // A call may meet the failover: retried, as a user's client would.
    const status = async (jobId: string): Promise<JobStatus> => {
      for (let i = 0; ; i++) {
        try {
          const { status } = await client.getJob({ jobId })
          if (status !== undefined) return status
        } catch (e) {
          if (i > 60) throw e
        }
        await sleep(500)
      }
    }
    const terminal = new Set([JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED])
    // Strike while both jobs have episodes under way (or, a fast one, after it ended).
    for (;;) {
      const [e, t] = [await status(evalId), await status(trainId)]
      const going = (s: JobStatus) =>
        (s.counts?.episodesRunning ?? 0) + (s.counts?.episodesFinished ?? 0) >= 1
      if ((going(e) || terminal.has(e.state)) && (going(t) || terminal.has(t.state))) {
        expect(terminal.has(t.state), "the train job ended before the fault").toBe(false)
        break
      }
      await sleep(200)
    }
    const servers = cluster.nodes.map((n) => n.url)
    const leader = await leaderOf(servers, `KV_${PREFIX}-jobs`)
    const index = cluster.nodes.findIndex((n) => n.name === leader)
    expect(index).toBeGreaterThanOrEqual(0)
    await cluster.nodes[index]?.kill()
    const others = servers.filter((_, i) => i !== index)
    const elected = await leaderOf(others, `KV_${PREFIX}-jobs`)
    expect(elected).not.toBe(leader)
    await sleep(3000)
    await cluster.nodes[index]?.start()

    const events = async (jobId: string) => {
      const out: JobEvent[] = []
      for await (const e of client.watchJob({ jobId, fromSeq: 1n })) out.push(e)
      return out
    }
    const until = Date.now() + 150_000
    for (const id of [evalId, trainId]) {
      while (!terminal.has((await status(id)).state)) {
        if (Date.now() > until) throw new Error(`job ${id} still running:\n${output.slice(-4000)}`)
        await sleep(500)
      }
    }
    const [evalStatus, trainStatus] = [await status(evalId), await status(trainId)]
    expect(JobState[evalStatus.state], output.slice(-4000)).toBe("SUCCEEDED")
    expect(JobState[trainStatus.state], output.slice(-4000)).toBe("SUCCEEDED")
    const evalEvents = await events(evalId)
    const finished = evalEvents.filter((e) => e.event.case === "episodeFinished")
    expect(finished).toHaveLength(2)
    expect(new Set(finished.map((e) => e.seq)).size).toBe(2)
    const trainEvents = await events(trainId)
    expect(trainEvents.filter((e) => e.event.case === "learnerStep")).toHaveLength(1)
    expect(trainStatus.policyVersion).toBe(1n)
  }, 240_000)
})
