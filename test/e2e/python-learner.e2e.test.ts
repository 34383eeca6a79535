/**
 * Bring your own trainer, as users run it: every t1 actor its own process on NATS and Docker (no
 * t1 learner for this job: learner.external), and the PyTorch reference learner
 * (clients/python, `python3 -m t1_trainer.learner`) as the job's learner through the gateway's
 * TrainerService. A train job of 3 updates: the samplers switch to each version it publishes,
 * the job SUCCEEDS, and the audit of test:faults holds (nothing lost, nothing trained twice).
 * The learner is killed (SIGKILL) after its first update and started again: it resumes from the
 * last published version without training a batch twice.
 */

import { type ChildProcess, spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import Dockerode from "dockerode"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { JobEvent } from "../../proto/index.ts"
import { type JobServiceClient, jobServiceClient } from "../../services/gateway/index.ts"
import { auditJob, endRecords } from "../faults/audit.ts"
import { useNatsServer } from "../support/nats-url.ts"
import { CLIENT_DIR, torchPython } from "../support/python.ts"
import { coreMembers, freePort, type System, startSystem } from "../support/system.ts"
import { smallTrainSpec } from "../support/train-spec.ts"

const python = torchPython

const nats = useNatsServer()
const docker = new Dockerode()
const owner = `e2e-torch-${randomUUID().slice(0, 8)}`

interface Learner {
  readonly child: ChildProcess
  output: string
  readonly exited: Promise<number | null>
}

const startLearner = (address: string, jobId: string): Learner => {
  const child = spawn(
    python as string,
    ["-m", "t1_trainer.learner", "--gateway", address, "--job", jobId, "--trainer-id", "torch-e2e"],
    { cwd: CLIENT_DIR, stdio: ["ignore", "pipe", "pipe"] },
  )
  const learner: Learner = {
    child,
    output: "",
    exited: new Promise((resolve) => child.on("exit", (code) => resolve(code))),
  }
  const keep = (b: Buffer) => {
    learner.output += b.toString()
  }
  child.stdout?.on("data", keep)
  child.stderr?.on("data", keep)
  return learner
}

describe.skipIf(python === undefined)("the PyTorch reference learner trains a t1 job", () => {
  let system: System
  let client: JobServiceClient
  let address = ""

  beforeAll(async () => {
    system = startSystem({ natsUrl: nats.url, prefix: `trn${randomUUID().slice(0, 6)}` })
    const listen = await freePort()
    address = `127.0.0.1:${listen}`
    // t1's learner pool runs too: it must leave the external job alone.
    for (const member of coreMembers(address, owner)) await system.start(member)
    client = jobServiceClient(address, { timeoutMs: 10_000 })
  }, 400_000)

  afterAll(async () => {
    client?.close()
    await system?.shutdown()
    const left = await docker.listContainers({
      all: true,
      filters: { label: [`t1.owner=${owner}`] },
    })
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true })))
  }, 60_000)

  it("3 updates; killed after the first and restarted, it resumes from the last published version; the audit holds", async () => {
    const learners: Learner[] = []
    try {
      const { jobId } = await client.submitJob({
        spec: smallTrainSpec(
          "torch reference learner",
          { ppoSteps: 3, external: true },
          {
            taskIds: ["config-edit-easy-s1-000", "csv-aggregate-easy-s0-000"],
            maxConcurrentEpisodes: 4,
          },
        ),
      })
      await system.start({
        name: "sampler",
        args: ["actor", "sampler", "--job", jobId, "--format", "shell-block", "--concurrency", "4"],
      })
      const events: JobEvent[] = []
      const watching = (async () => {
        for await (const e of client.watchJob({ jobId })) events.push(e)
      })()
      const steps = () =>
        events.flatMap((e) => (e.event.case === "learnerStep" ? [e.event.value] : []))

      // The first learner trains and publishes one update, then dies without warning.
      learners.push(startLearner(address, jobId))
      for (
        let waited = 0;
        !learners[0]?.output.includes("step 1:") &&
        learners[0]?.child.exitCode === null &&
        waited < 180_000;
        waited += 100
      )
        await new Promise((r) => setTimeout(r, 100))
      expect(learners[0]?.output).toContain("step 1:")
      learners[0]?.child.kill("SIGKILL")
      await learners[0]?.exited
      // Started again: it claims the job (same trainer id) and resumes from what was published.
      learners.push(startLearner(address, jobId))
      await watching
      const code = await learners[1]?.exited

      const { status } = await client.getJob({ jobId })
      if (status === undefined) throw new Error("no status")
      const ends = await endRecords(nats.url, system.prefix, jobId)
      const audit = auditJob(status, events, ends, 3)
      expect(audit.problems).toEqual([])
      expect(code).toBe(0)
      expect(steps().map((s) => Number(s.step))).toEqual([1, 2, 3])
      expect(learners[1]?.output).toMatch(/from v1 at step 1\b/)
      // The samplers switched to the learner's versions: episodes were sampled on v1 and v2.
      const versions = new Set(ends.map((e) => Number(e.policyVersionEnd)))
      expect(versions.has(1) && versions.has(2)).toBe(true)
    } catch (e) {
      console.error(system.dump())
      for (const l of learners) console.error(`python learner:\n${l.output}`)
      throw e
    } finally {
      for (const l of learners) if (l.child.exitCode === null) l.child.kill("SIGKILL")
    }
  }, 400_000)
})
