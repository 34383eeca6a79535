/**
 * `npm run test:faults`: the whole system as processes on a private nats-server (JetStream on
 * disk) and the Docker engine. For each fault a small train job runs, and while it runs one
 * part is SIGKILLed (and started again): each actor process, the gateway, a sandbox container,
 * the NATS server; or (`breaker`) a second sandbox host joins whose engine fails every create,
 * and its circuit breaker must take it out of the queue group while the job runs on the healthy
 * host. Every job must still succeed, and its audit (test/faults/audit.ts) must find nothing lost
 * and nothing counted twice. Prints a table; `--json` prints one object last.
 *
 * The `nats-*` faults run on a second system, on a three-node JetStream cluster
 * (test/support/nats-cluster.ts) with every process given the three URLs and three replicas:
 * `nats-leader` SIGKILLs the node leading the job store's KV stream and the trajectory stream
 * (stepped down onto one node first) and starts it 5 s later; `nats-rolling` restarts the three
 * nodes one at a time (SIGTERM, start, wait for every replica to catch up); `nats-partition`
 * cuts the job store's leader off from the other two (its routes gone) for 10 s, then heals it.
 *
 *   npm run test:faults -- [--json] [--faults none,sampler,…]
 */
import { randomUUID } from "node:crypto"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import Dockerode from "dockerode"
import { type JobEvent, JobKind, JobState, type JobStatus } from "../../proto/index.ts"
import { subjectsFor } from "../../services/bus/index.ts"
import { type JobServiceClient, jobServiceClient } from "../../services/gateway/client.ts"
import { type FailingEngine, startFailingEngine } from "../support/failing-engine.ts"
import { startTestNatsCluster, type TestNatsCluster } from "../support/nats-cluster.ts"
import { type NatsServerProcess, startNatsServer } from "../support/nats-server.ts"
import { freePort, type MemberSpec, metricValue, startSystem } from "../support/system.ts"
import { type Audit, auditJob, endRecords } from "./audit.ts"

const FAULTS = [
  "none",
  "sampler",
  "sandbox",
  "verifier",
  "buffer",
  "learner",
  "coordinator",
  "gateway",
  "container",
  "nats",
  "breaker",
  "nats-leader",
  "nats-rolling",
  "nats-partition",
] as const
type Fault = (typeof FAULTS)[number]

/**
 * The faults of a three-node JetStream cluster: they run on a system of their own whose every
 * process is given the three URLs and `--nats-replicas 3` (T1_NATS_REPLICAS).
 */
const CLUSTER_FAULTS: ReadonlySet<Fault> = new Set([
  "nats-leader",
  "nats-rolling",
  "nats-partition",
])

/** Where in the job each fault strikes. */
const trigger: Record<Fault, (s: JobStatus) => boolean> = {
  none: () => true,
  sampler: (s) => (s.counts?.episodesRunning ?? 0) >= 1,
  sandbox: (s) => (s.counts?.episodesRunning ?? 0) >= 1,
  verifier: (s) => (s.counts?.episodesRunning ?? 0) >= 1,
  buffer: (s) => (s.counts?.episodesFinished ?? 0) >= 1,
  learner: (s) => s.learnerStep >= 1n,
  coordinator: (s) => (s.counts?.episodesRunning ?? 0) >= 1,
  gateway: (s) => (s.counts?.episodesRunning ?? 0) >= 1,
  container: (s) => (s.counts?.episodesRunning ?? 0) >= 1,
  nats: (s) => (s.counts?.episodesFinished ?? 0) >= 1,
  // The broken host is there from the start; it strikes at the job's first creates.
  breaker: () => true,
  "nats-leader": (s) => (s.counts?.episodesFinished ?? 0) >= 1,
  // The roll takes the whole job: it starts with the first episode.
  "nats-rolling": (s) => (s.counts?.episodesRunning ?? 0) >= 1,
  "nats-partition": (s) => (s.counts?.episodesFinished ?? 0) >= 1,
}

/** The broken host's breaker: out after 2 failed creates, for longer than any job here. */
const BREAKER_FAILURES = 2
const BREAKER_WINDOW_MS = 60_000

const PPO_STEPS = 2
const TRAIN_DIR = fileURLToPath(new URL("../../tasks/bundled/train", import.meta.url))

const { values: flags } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    faults: { type: "string" },
    "job-timeout-ms": { type: "string" },
  },
})
const chosen = (flags.faults?.split(",") ?? [...FAULTS]).map((f) => {
  if (!(FAULTS as ReadonlyArray<string>).includes(f)) {
    process.stderr.write(`--faults: unknown fault ${JSON.stringify(f)}; one of ${FAULTS}\n`)
    process.exit(2)
  }
  return f as Fault
})
const jobTimeoutMs = Number(flags["job-timeout-ms"] ?? 6 * 60_000)

const log = (line: string) => process.stderr.write(`[faults] ${line}\n`)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Retries a gateway call while the gateway or NATS is down (a fault in progress). */
const call = async <T>(what: string, f: () => Promise<T>, forMs = 120_000): Promise<T> => {
  const until = Date.now() + forMs
  for (;;) {
    try {
      return await f()
    } catch (e) {
      if (Date.now() > until) throw new Error(`${what}: ${e instanceof Error ? e.message : e}`)
      await sleep(500)
    }
  }
}

const events = async (client: JobServiceClient, jobId: string): Promise<JobEvent[]> => {
  const out: JobEvent[] = []
  for await (const e of client.watchJob({ jobId })) out.push(e)
  return out
}

const TERMINAL = new Set([JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED])

/**
 * An admin connection to the cluster's nodes that are up (the faults' own, not t1's); the call
 * is retried for 30 s while the cluster elects (JetStream's API does not answer meanwhile).
 */
const admin = async <T>(
  cluster: TestNatsCluster,
  f: (nc: NatsConnection, jsm: JetStreamManager) => Promise<T>,
): Promise<T> => {
  const until = Date.now() + 30_000
  for (;;) {
    const servers = cluster.nodes.filter((n) => n.running()).map((n) => n.url)
    try {
      const nc = await connect({ servers, name: "t1-fault-admin" })
      try {
        return await f(nc, await jetstreamManager(nc))
      } finally {
        await nc.close()
      }
    } catch (e) {
      if (Date.now() > until) throw e
      await sleep(500)
    }
  }
}

/** The server leading a stream's raft group, once it has one (an election may be under way). */
const leaderOf = async (
  jsm: JetStreamManager,
  stream: string,
  other?: string,
  forMs = 30_000,
): Promise<string> => {
  const until = Date.now() + forMs
  for (;;) {
    const leader = await jsm.streams
      .info(stream)
      .then((si) => si.cluster?.leader)
      .catch(() => undefined)
    if (leader !== undefined && leader !== other) return leader
    if (Date.now() > until)
      throw new Error(`${stream}: no leader (other than ${other}) in ${forMs} ms`)
    await sleep(200)
  }
}

/**
 * Waits until every replicated stream has a leader and every replica is current (a node just
 * back has caught up), so that the next node of a roll can go without taking a quorum with it.
 */
const settled = async (cluster: TestNatsCluster, forMs = 30_000): Promise<boolean> => {
  const until = Date.now() + forMs
  while (Date.now() < until) {
    const ok = await admin(cluster, async (_nc, jsm) => {
      for await (const si of jsm.streams.list()) {
        const c = si.cluster
        if (c?.leader === undefined) return false
        if ((c.replicas ?? []).some((r) => !r.current || r.offline === true)) return false
      }
      return true
    }).catch(() => false)
    if (ok) return true
    await sleep(500)
  }
  return false
}

const nodeIndex = (cluster: TestNatsCluster, name: string) => {
  const i = cluster.nodes.findIndex((n) => n.name === name)
  if (i < 0) throw new Error(`no node named ${name}`)
  return i
}

/** Strikes the cluster mid-job; returns the note for the table (which nodes, how long). */
const strikeCluster = async (
  fault: Fault,
  cluster: TestNatsCluster,
  prefix: string,
): Promise<string> => {
  const subjects = subjectsFor(prefix)
  const kv = `KV_${subjects.jobsBucket}`
  const traj = subjects.trajectoriesStream
  if (fault === "nats-leader") {
    // One node leading both raft groups: step the trajectory stream's leader down (to a random
    // other peer on this nats-server) until it lands on the job store's.
    const leader = await admin(cluster, async (nc, jsm) => {
      const want = await leaderOf(jsm, kv)
      for (let i = 0; i < 16 && (await leaderOf(jsm, traj)) !== want; i++) {
        await nc
          .request(`$JS.API.STREAM.LEADER.STEPDOWN.${traj}`, undefined, { timeout: 5000 })
          .catch(() => undefined)
        await sleep(500)
      }
      return want
    })
    const trajLeader = await admin(cluster, (_nc, jsm) => leaderOf(jsm, traj))
    const i = nodeIndex(cluster, leader)
    const t0 = Date.now()
    await cluster.nodes[i]?.kill()
    const elected = await admin(cluster, async (_nc, jsm) => ({
      kv: await leaderOf(jsm, kv, leader),
      traj: await leaderOf(jsm, traj, leader),
    }))
    const electedMs = Date.now() - t0
    log(
      `nats-leader: killed ${leader}; new leaders ${kv} ${elected.kv}, ${traj} ${elected.traj} in ${electedMs} ms`,
    )
    await sleep(Math.max(0, 5000 - electedMs))
    await cluster.nodes[i]?.start()
    return `; SIGKILLed ${leader} (leader of ${kv}${trajLeader === leader ? ` and ${traj}` : `; ${traj}'s was ${trajLeader}`}), new leaders in ${(electedMs / 1000).toFixed(1)} s, back after 5 s`
  }
  if (fault === "nats-rolling") {
    const t0 = Date.now()
    const waits: string[] = []
    for (const node of cluster.nodes) {
      await node.stop()
      await sleep(1000)
      await node.start()
      const w0 = Date.now()
      const ok = await settled(cluster)
      waits.push(ok ? `${((Date.now() - w0) / 1000).toFixed(1)} s` : "not current in 30 s")
      log(`nats-rolling: ${node.name} restarted, replicas current: ${waits.at(-1)}`)
    }
    return `; rolled ${cluster.nodes.map((n) => n.name).join(", ")} (SIGTERM, start, caught up: ${waits.join(", ")}) in ${((Date.now() - t0) / 1000).toFixed(0)} s`
  }
  // nats-partition: the job store's leader cut off from the other two for 10 s, then healed.
  const leader = await admin(cluster, (_nc, jsm) => leaderOf(jsm, kv))
  const i = nodeIndex(cluster, leader)
  await cluster.partition(i)
  const elected = await admin(cluster, (_nc, jsm) => leaderOf(jsm, kv, leader)).catch(() => "none")
  await sleep(10_000)
  await cluster.heal(i)
  const ok = await settled(cluster)
  log(
    `nats-partition: ${leader} cut off 10 s (${kv} re-elected ${elected}), healed; current: ${ok}`,
  )
  return `; ${leader} (leader of ${kv}) partitioned 10 s, ${elected} elected, healed${ok ? "" : " (replicas not current in 30 s)"}`
}

type Row = { fault: Fault; jobId: string; seconds: number; note: string } & Audit

/** What a phase's faults act on: the single server or the three-node cluster. */
type Nats =
  | { readonly kind: "single"; readonly server: NatsServerProcess }
  | { readonly kind: "cluster"; readonly cluster: TestNatsCluster }

/** Starts the system on `nats` and runs each fault's job on it; a row per fault into `rows`. */
const phase = async (faults: ReadonlyArray<Fault>, nats: Nats, rows: Row[]) => {
  const started = Date.now()
  const urls = nats.kind === "single" ? nats.server.url : nats.cluster.urls
  const prefix = `faults${randomUUID().slice(0, 6)}`
  const owner = `faults-${randomUUID().slice(0, 8)}`
  const docker = new Dockerode()
  const system = startSystem({
    natsUrl: urls,
    prefix,
    ...(nats.kind === "cluster" ? { env: { T1_NATS_REPLICAS: "3" } } : {}),
  })
  const listen = await freePort()
  const members: MemberSpec[] = [
    { name: "gateway", args: ["gateway", "--listen", `127.0.0.1:${listen}`] },
    {
      name: "coordinator",
      args: ["actor", "coordinator", "--lease-ttl-ms", "3000", "--cancel-grace-ms", "5000"],
    },
    {
      name: "sandbox",
      args: ["actor", "sandbox", "--driver", "docker", "--owner", owner, "--concurrency", "16"],
    },
    { name: "verifier", args: ["actor", "verifier", "--concurrency", "4"] },
    { name: "sampler", args: ["actor", "sampler", "--concurrency", "4"] },
    {
      name: "buffer",
      args: ["actor", "buffer", "--lease-ttl-ms", "3000", "--batch-ack-timeout-ms", "30000"],
    },
    {
      name: "learner",
      args: ["actor", "learner", "--lease-ttl-ms", "3000", "--checkpoint-every", "1"],
    },
  ]
  const client = jobServiceClient(`127.0.0.1:${listen}`, { timeoutMs: 5000 })
  try {
    for (const m of members) await system.start(m)
    log(
      `system up on ${nats.kind === "single" ? "one NATS server" : "a three-node NATS cluster (R3)"} in ${((Date.now() - started) / 1000).toFixed(0)} s (logs: ${system.logDir})`,
    )
    for (const fault of faults) {
      const t0 = Date.now()
      let failing: FailingEngine | undefined
      if (fault === "breaker") {
        failing = await startFailingEngine()
        await system.start({
          name: "sandbox-broken",
          args: [
            "actor",
            "sandbox",
            "--driver",
            "docker",
            "--owner",
            `${owner}-broken`,
            "--breaker-failures",
            String(BREAKER_FAILURES),
            "--breaker-window-ms",
            String(BREAKER_WINDOW_MS),
            "--breaker-cooldown-ms",
            String(jobTimeoutMs),
            // One create at its engine at a time (two taken, against 4 and 8 by default): fewer
            // creates already taken when the breaker opens, which still reach the engine (a CI
            // run saw 5 refused against the bound of 4 below with the defaults).
            "--max-starting",
            "1",
          ],
          env: { DOCKER_HOST: failing.dockerHost },
        })
      }
      const group = fault === "breaker" ? 4 : 2
      const { jobId } = await call("SubmitJob", () =>
        client.submitJob({
          spec: {
            name: `fault ${fault}`,
            kind: JobKind.TRAIN,
            taskSet: TRAIN_DIR,
            taskIds: ["config-edit-easy-s1-000"],
            // The breaker's job sends more creates at once, so that the queue group gives the
            // broken host enough of them to open its breaker.
            samplesPerTask: group,
            maxConcurrentEpisodes: group,
            sampling: { temperature: 1, topP: 1, maxTokens: 24 },
            limits: { maxTurns: 1, wallClockSec: 120 },
            learner: {
              batchTrajectories: group,
              ppoSteps: PPO_STEPS,
              maxStaleness: 1,
              criticWarmupSteps: 0,
            },
          },
          requestId: `${prefix}-${fault}`,
        }),
      )
      const status = async () => {
        const { status } = await call("GetJob", () => client.getJob({ jobId }))
        if (status === undefined) throw new Error(`job ${jobId} has no status`)
        return status
      }
      let now = await status()
      while (!trigger[fault](now) && !TERMINAL.has(now.state)) {
        await sleep(200)
        now = await status()
      }
      // A fault that did not strike proves nothing: it counts as not survived.
      let missed = TERMINAL.has(now.state) && fault !== "none"
      log(`${fault}: striking job ${jobId}`)
      let clusterNote = ""
      if (fault === "container") {
        // A container may stop between listing and the kill (its episode ended): try the next.
        let killed = false
        for (let tries = 0; !killed && tries < 100; tries++) {
          const running = await docker.listContainers({
            filters: { label: [`t1.owner=${owner}`], status: ["running"] },
          })
          for (const c of running) {
            killed = await docker
              .getContainer(c.Id)
              .kill()
              .then(() => true)
              .catch(() => false)
            if (killed) break
          }
          if (!killed) await sleep(200)
        }
        if (!killed) missed = true
      } else if (fault === "nats" && nats.kind === "single") {
        await nats.server.kill()
        await sleep(2000)
        await nats.server.restart()
      } else if (CLUSTER_FAULTS.has(fault) && nats.kind === "cluster") {
        clusterNote = await strikeCluster(fault, nats.cluster, prefix)
      } else if (fault !== "none" && fault !== "breaker") {
        await system.stop(fault, "SIGKILL")
        await system.restart(fault)
      }
      const deadline = Date.now() + jobTimeoutMs
      now = await status()
      while (!TERMINAL.has(now.state)) {
        if (Date.now() > deadline) throw new Error(`${fault}: job ${jobId} still running`)
        await sleep(500)
        now = await status()
      }
      const log_ = await call("WatchJob", () => events(client, jobId))
      const ends = await endRecords(urls, prefix, jobId)
      const checked = auditJob(now, log_, ends, PPO_STEPS)
      const isolation: string[] = []
      let note = clusterNote
      if (failing !== undefined) {
        // Isolated: its breaker opened, and no create reached its engine after the ones that
        // opened it (a retry already on its way may add one per create slot).
        const text = await system.metrics("sandbox-broken")
        const opens = metricValue(text, "t1_breaker_opens_total")
        const refused = failing.refused()
        log(
          `breaker: the broken host refused ${refused} creates, its breaker opened ${opens} time(s)`,
        )
        note = `; broken host out after ${refused} refused creates (breaker opened ${opens}x)`
        if (opens < 1) isolation.push("the broken host's circuit breaker never opened")
        if (refused < BREAKER_FAILURES) missed = true
        if (refused > BREAKER_FAILURES * 2)
          isolation.push(`the broken host took ${refused} creates: not isolated`)
        await system.stop("sandbox-broken")
        await failing.close()
      }
      const audit = {
        ...checked,
        problems: [
          ...checked.problems,
          ...isolation,
          ...(missed ? ["the fault did not strike while the job ran"] : []),
        ],
      }
      const seconds = (Date.now() - t0) / 1000
      rows.push({ fault, jobId, seconds, note, ...audit })
      log(
        `${fault}: ${audit.state} in ${seconds.toFixed(0)} s, ${audit.problems.length === 0 ? "audit clean" : audit.problems.join("; ")}`,
      )
    }
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : e}\n${system.dump()}\n`)
    process.exitCode = 1
  } finally {
    client.close()
    await system.shutdown()
    const left = await docker.listContainers({
      all: true,
      filters: { label: [`t1.owner=${owner}`] },
    })
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true })))
  }
}

const main = async () => {
  const started = Date.now()
  const rows: Row[] = []
  const single = chosen.filter((f) => !CLUSTER_FAULTS.has(f))
  const clustered = chosen.filter((f) => CLUSTER_FAULTS.has(f))
  if (single.length > 0) {
    const server = await startNatsServer()
    try {
      await phase(single, { kind: "single", server }, rows)
    } finally {
      await server.stop()
    }
  }
  if (clustered.length > 0) {
    const cluster = await startTestNatsCluster()
    try {
      await phase(clustered, { kind: "cluster", cluster }, rows)
    } finally {
      await cluster.close()
    }
  }

  const header = [
    "fault",
    "state",
    "admitted",
    "retried",
    "finished",
    "ended",
    "trained",
    "steps",
    "s",
    "audit",
  ]
  const table = rows.map((r) => [
    r.fault,
    r.state,
    String(r.admitted),
    String(r.retried),
    String(r.finished),
    String(r.ended),
    String(r.trained),
    String(r.steps),
    r.seconds.toFixed(0),
    (r.problems.length === 0 ? "nothing lost, nothing twice" : r.problems.join("; ")) + r.note,
  ])
  const widths = header.map((h, i) =>
    Math.max(h.length, ...table.map((row) => row[i]?.length ?? 0)),
  )
  const line = (cells: ReadonlyArray<string>) =>
    `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(" | ")} |`
  process.stdout.write(
    `${[line(header), line(widths.map((w) => "-".repeat(w))), ...table.map(line)].join("\n")}\n`,
  )
  const survived = rows.filter((r) => r.problems.length === 0).length
  if (survived !== chosen.length) process.exitCode = 1
  if (flags.json)
    process.stdout.write(
      `${JSON.stringify({
        faults: rows.map((r) => ({
          fault: r.fault,
          state: r.state,
          admitted: r.admitted,
          retried: r.retried,
          finished: r.finished,
          ended: r.ended,
          trained: r.trained,
          steps: r.steps,
          seconds: Math.round(r.seconds),
          problems: r.problems,
          ...(r.note === "" ? {} : { note: r.note.slice(2) }),
        })),
        survived,
        total: chosen.length,
        seconds: Math.round((Date.now() - started) / 1000),
      })}\n`,
    )
}

await main()
