/**
 * The system as users run it: every actor and two gateways in their own processes on real NATS
 * and a real Docker engine; jobs go in through a gRPC client, and their event streams, final
 * statuses and /metrics are what is checked.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { fileURLToPath } from "node:url"
import Dockerode from "dockerode"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type JobEvent, JobKind, JobState, type JobStatus, TrainPhase } from "../../proto/index.ts"
import { type JobServiceClient, jobServiceClient } from "../../services/gateway/client.ts"
import { useNatsServer } from "../support/nats-url.ts"
import { freePort, metricValue, type System, startSystem } from "../support/system.ts"

const EVAL_DIR = fileURLToPath(new URL("../../tasks/bundled/eval", import.meta.url))
const TRAIN_DIR = fileURLToPath(new URL("../../tasks/bundled/train", import.meta.url))

const nats = useNatsServer()
const docker = new Dockerode()
const owner = `e2e-jobs-${randomUUID().slice(0, 8)}`

/** Short episodes: two turns of at most 24 tokens each. */
const quick = {
  sampling: { temperature: 1, topP: 1, maxTokens: 24 },
  limits: { maxTurns: 2, wallClockSec: 120 },
}

const follow = async (client: JobServiceClient, jobId: string, fromSeq = 1n) => {
  const events: JobEvent[] = []
  for await (const event of client.watchJob({ jobId, fromSeq })) events.push(event)
  return events
}

const expectContiguous = (events: ReadonlyArray<JobEvent>, status: JobStatus, from = 1n) => {
  events.forEach((e, i) => {
    expect(e.seq).toBe(from + BigInt(i))
  })
  expect(events.at(-1)?.seq).toBe(status.lastEventSeq)
}

const finishedEpisodes = (events: ReadonlyArray<JobEvent>) =>
  events.flatMap((e) => (e.event.case === "episodeFinished" ? [e.event.value] : []))

const promtool = spawnSync("promtool", ["--version"]).status === 0

describe("jobs end to end (gRPC client, every actor a process, NATS, Docker)", () => {
  let system: System
  let gateways: JobServiceClient[] = []

  beforeAll(async () => {
    system = startSystem({ natsUrl: nats.url, prefix: `e2e${randomUUID().slice(0, 6)}` })
    const listen = [await freePort(), await freePort()]
    // One at a time: each process compiles the tree on start, and two cores are all there is.
    const members = [
      ...listen.map((port, i) => ({
        name: `gateway-${i + 1}`,
        args: ["gateway", "--listen", `127.0.0.1:${port}`, "--shutdown-grace-ms", "2000"],
      })),
      {
        name: "coordinator-1",
        args: ["actor", "coordinator", "--lease-ttl-ms", "3000", "--cancel-grace-ms", "5000"],
      },
      {
        name: "sandbox",
        args: ["actor", "sandbox", "--driver", "docker", "--owner", owner, "--concurrency", "16"],
      },
      { name: "verifier", args: ["actor", "verifier", "--concurrency", "4"] },
      { name: "sampler", args: ["actor", "sampler", "--concurrency", "4"] },
      { name: "buffer", args: ["actor", "buffer", "--lease-ttl-ms", "3000"] },
      { name: "learner", args: ["actor", "learner", "--lease-ttl-ms", "3000"] },
    ]
    for (const member of members) await system.start(member)
    gateways = listen.map((port) => jobServiceClient(`127.0.0.1:${port}`, { timeoutMs: 10_000 }))
  }, 400_000)

  afterAll(async () => {
    for (const g of gateways) g.close()
    await system?.shutdown()
    const left = await docker.listContainers({
      all: true,
      filters: { label: [`t1.owner=${owner}`] },
    })
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true })))
  }, 60_000)

  const gw = (i: number) => gateways[i] as JobServiceClient

  it("runs an eval job: admitted, every episode's reward, resolved rate and pass@k, SUCCEEDED", async () => {
    try {
      const { jobId } = await gw(0).submitJob({
        spec: {
          name: "e2e eval",
          kind: JobKind.EVAL,
          taskSet: EVAL_DIR,
          taskIds: ["json-merge-easy-s1000000-000", "log-report-easy-s1000002-000"],
          samplesPerTask: 2,
          policyRef: "tinymoe:init",
          ...quick,
        },
        requestId: `e2e-eval-${randomUUID()}`,
      })
      const events = await follow(gw(0), jobId)
      const { status } = await gw(1).getJob({ jobId })
      if (status === undefined) throw new Error("no status")
      expect(status.state).toBe(JobState.SUCCEEDED)
      expectContiguous(events, status)
      expect(events[0]?.event.case).toBe("stateChanged")
      const admitted = events.find((e) => e.event.case === "admitted")
      expect(admitted?.event.value).toMatchObject({ episodesTotal: 4, tasks: 2 })
      const finished = finishedEpisodes(events)
      expect(finished).toHaveLength(4)
      expect(new Set(finished.map((f) => f.episodeId)).size).toBe(4)
      for (const f of finished) {
        expect(f.infraFailed).toBe(false)
        expect(f.turns).toBeGreaterThan(0)
        expect(f.reward).toBeGreaterThanOrEqual(0)
      }
      const evaluation = events.find((e) => e.event.case === "evaluation")?.event.value
      if (evaluation === undefined || !("passAtK" in evaluation)) throw new Error("no evaluation")
      expect(evaluation.episodes).toBe(4)
      expect(evaluation.tasks).toBe(2)
      expect(Object.keys(evaluation.passAtK).sort()).toEqual(["1", "2"])
      expect(evaluation.perTask.map((t) => t.samples)).toEqual([2, 2])
      expect(evaluation.perTask.map((t) => t.task.split("/").at(-1)).sort()).toEqual([
        "json-merge-easy-s1000000-000",
        "log-report-easy-s1000002-000",
      ])
      for (const t of evaluation.perTask) expect(Object.keys(t.passAtK).sort()).toEqual(["1", "2"])
      const resolved = finished.filter((f) => f.resolved).length
      expect(evaluation.resolvedRate).toBeCloseTo(resolved / 4, 9)
      expect(status.counts?.episodesFinished).toBe(4)
      expect(events.at(-1)?.event.value).toMatchObject({ state: JobState.SUCCEEDED })
    } catch (e) {
      console.error(system.dump())
      throw e
    }
  }, 300_000)

  it("trains: learner steps arrive as events, new weights reach the sampler, SUCCEEDED at the step budget", async () => {
    try {
      const { jobId } = await gw(1).submitJob({
        spec: {
          name: "e2e train",
          kind: JobKind.TRAIN,
          taskSet: TRAIN_DIR,
          taskIds: ["config-edit-easy-s1-000", "json-report-easy-s0-000"],
          samplesPerTask: 2,
          maxConcurrentEpisodes: 4,
          learner: { batchTrajectories: 4, ppoSteps: 2, maxStaleness: 1, criticWarmupSteps: 0 },
          ...quick,
        },
      })
      const events = await follow(gw(0), jobId)
      const { status } = await gw(0).getJob({ jobId })
      if (status === undefined) throw new Error("no status")
      expect(status.state).toBe(JobState.SUCCEEDED)
      expectContiguous(events, status)
      const steps = events.flatMap((e) => (e.event.case === "learnerStep" ? [e.event.value] : []))
      expect(steps.map((s) => Number(s.step))).toEqual([1, 2])
      for (const s of steps) {
        expect(s.jobId).toBe(jobId)
        expect(s.phase).toBe(TrainPhase.PPO)
        expect(s.trajectories).toBeGreaterThan(0)
        expect(Number(s.tokens)).toBeGreaterThan(0)
        // TITO + R3 against the sampler's own weights: the two sides agree closely.
        expect(s.trainInferLogprobAbsDiff).toBeLessThan(0.05)
      }
      expect(status.learnerStep).toBe(2n)
      expect(status.policyVersion).toBe(2n)
      expect(finishedEpisodes(events).length).toBeGreaterThanOrEqual(4)
      // The sampler switched to the learner's weights (v1 or later) for later episodes.
      expect(system.members.get("sampler")?.output).toMatch(/weights v[12] \(step [12]\) in use/)
    } catch (e) {
      console.error(system.dump())
      throw e
    }
  }, 400_000)

  it("warm start: an SFT job's updates arrive as SFT learner steps, then an eval job samples its weights", async () => {
    try {
      const sftSteps = 4
      const { jobId } = await gw(0).submitJob({
        spec: {
          name: "e2e sft",
          kind: JobKind.SFT,
          taskSet: TRAIN_DIR,
          taskIds: ["config-edit-easy-s1-000", "json-report-easy-s0-000"],
          learner: { sftSteps, batchTrajectories: 2, sftLr: 1e-3 },
        },
      })
      const events = await follow(gw(1), jobId)
      const { status } = await gw(1).getJob({ jobId })
      if (status === undefined) throw new Error("no status")
      expect(status.state).toBe(JobState.SUCCEEDED)
      expectContiguous(events, status)
      // No episodes of its own: the learner plays the reference solutions.
      expect(finishedEpisodes(events)).toHaveLength(0)
      const steps = events.flatMap((e) => (e.event.case === "learnerStep" ? [e.event.value] : []))
      expect(steps.map((s) => [Number(s.step), s.phase])).toEqual(
        Array.from({ length: sftSteps }, (_, i) => [i + 1, TrainPhase.SFT]),
      )
      for (const s of steps) {
        expect(s.policyLoss).toBeGreaterThan(0)
        expect(s.trajectories).toBe(2)
        expect(s.metrics.golden_trajectories).toBe(2)
      }
      expect(status.policyVersion).toBe(0n)
      expect(status.learnerStep).toBe(0n)

      const evalJob = await gw(0).submitJob({
        spec: {
          name: "e2e eval of the warm start",
          kind: JobKind.EVAL,
          taskSet: EVAL_DIR,
          taskIds: ["json-merge-easy-s1000000-000"],
          samplesPerTask: 1,
          policyRef: `job:${jobId}`,
          ...quick,
        },
      })
      const evalEvents = await follow(gw(0), evalJob.jobId)
      const finished = finishedEpisodes(evalEvents)
      expect(finished).toHaveLength(1)
      expect(finished[0]?.testsTotal).toBeGreaterThan(0)
      // The dense reward is the number of passing tests.
      expect(finished[0]?.reward).toBe(finished[0]?.testsPassed)
      expect(evalEvents.at(-1)?.event.value).toMatchObject({ state: JobState.SUCCEEDED })
    } catch (e) {
      console.error(system.dump())
      throw e
    }
  }, 400_000)

  it("a second gateway and a coordinator killed mid-job keep the job going, every episode counted once", async () => {
    try {
      const { jobId } = await gw(0).submitJob({
        spec: {
          name: "e2e failover",
          kind: JobKind.EVAL,
          taskSet: EVAL_DIR,
          taskIds: [
            "json-merge-medium-s1000001-000",
            "log-report-medium-s1000000-000",
            "script-tool-easy-s1000001-000",
          ],
          samplesPerTask: 2,
          maxConcurrentEpisodes: 2,
          ...quick,
        },
      })
      // Watch through the second gateway while the first one keeps serving calls.
      const watched = follow(gw(1), jobId)
      for (;;) {
        const { status } = await gw(0).getJob({ jobId })
        if ((status?.counts?.episodesFinished ?? 0) >= 1) break
        await new Promise((r) => setTimeout(r, 200))
      }
      await system.stop("coordinator-1", "SIGKILL")
      await system.start({
        name: "coordinator-2",
        args: ["actor", "coordinator", "--lease-ttl-ms", "3000", "--cancel-grace-ms", "5000"],
      })
      const events = await watched
      const { status } = await gw(0).getJob({ jobId })
      if (status === undefined) throw new Error("no status")
      expect(status.state).toBe(JobState.SUCCEEDED)
      expectContiguous(events, status)
      const finished = finishedEpisodes(events)
      expect(finished).toHaveLength(6)
      expect(new Set(finished.map((f) => f.episodeId)).size).toBe(6)
      expect(status.counts?.episodesFinished).toBe(6)
      expect(events.filter((e) => e.event.case === "evaluation")).toHaveLength(1)
      expect(system.members.get("coordinator-2")?.output).toContain(jobId)
    } catch (e) {
      console.error(system.dump())
      throw e
    }
  }, 400_000)

  it("every /metrics endpoint shows the work and passes promtool check metrics", async () => {
    const texts = new Map<string, string>()
    for (const name of system.members.keys()) {
      const member = system.members.get(name)
      if (member?.child.exitCode !== null || member?.child.signalCode !== null) continue
      texts.set(name, await system.metrics(name))
    }
    const sum = (member: string, metric: string) => metricValue(texts.get(member) ?? "", metric)
    expect(sum("gateway-1", "t1_gateway_requests_total")).toBeGreaterThan(0)
    expect(sum("gateway-2", "t1_gateway_requests_total")).toBeGreaterThan(0)
    expect(sum("coordinator-2", "t1_coordinator_episodes_finished_total")).toBeGreaterThan(0)
    expect(sum("sampler", "t1_sampler_episodes_total")).toBeGreaterThanOrEqual(14)
    expect(sum("sampler", "t1_sampler_generated_tokens_total")).toBeGreaterThan(0)
    expect(sum("sandbox", "t1_sandbox_exec_duration_seconds_count")).toBeGreaterThan(0)
    expect(sum("verifier", "t1_verifier_verifications_total")).toBeGreaterThanOrEqual(14)
    expect(sum("buffer", "t1_buffer_trajectories_in_total")).toBeGreaterThanOrEqual(4)
    expect(sum("learner", "t1_learner_steps_total")).toBe(2)
    if (!promtool) {
      if (process.env.CI) throw new Error("promtool is not installed (Debian package prometheus)")
      return
    }
    for (const [name, text] of texts) {
      const out = execFileSync("promtool", ["check", "metrics"], { input: text }).toString()
      expect(out, `${name}: ${out}`).toBe("")
    }
  }, 60_000)
})
