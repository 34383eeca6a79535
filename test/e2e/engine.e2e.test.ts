/**
 * Engines as users run them: every actor its own process on NATS and Docker, the samplers
 * started as `t1 actor sampler --policy sglang --engine-url A,B --job JOB --checkpoint-dir DIR`
 * against two SGLang doubles served by this test. A train job for two learner steps: each
 * version the learner publishes is exported under DIR and loaded into both replicas (pause →
 * update_weights_from_disk with path and version → continue); one replica refuses its first
 * load and answers no turn until the bridge's retry loads it; turns after a load are answered
 * with the new version. The same against two vLLM doubles (`--policy vllm`): drain, pause →
 * collective_rpc reload_weights → update_weight_version → resume.
 */

import { randomUUID } from "node:crypto"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Dockerode from "dockerode"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { SglangDouble, VllmDouble } from "../../actors/sampler/policy/engine-double.ts"
import { type JobEvent, JobState } from "../../proto/index.ts"
import { type JobServiceClient, jobServiceClient } from "../../services/gateway/client.ts"
import { useSglangReplicas, useVllmReplicas, VLLM_MODEL } from "../support/engine-replicas.ts"
import { useNatsServer } from "../support/nats-url.ts"
import { coreMembers, freePort, type System, startSystem } from "../support/system.ts"
import { smallTrainSpec } from "../support/train-spec.ts"

const nats = useNatsServer()
const docker = new Dockerode()
const owner = `e2e-engine-${randomUUID().slice(0, 8)}`

describe("train job on SGLang and vLLM engines, every actor a process", () => {
  let system: System
  let client: JobServiceClient
  const replicas = useSglangReplicas()
  const vllm = useVllmReplicas()

  beforeAll(async () => {
    system = startSystem({ natsUrl: nats.url, prefix: `eng${randomUUID().slice(0, 6)}` })
    const listen = await freePort()
    for (const member of coreMembers(`127.0.0.1:${listen}`, owner)) await system.start(member)
    client = jobServiceClient(`127.0.0.1:${listen}`, { timeoutMs: 10_000 })
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

  /** A two-step train job; its samplers are `t1 actor sampler` with `policyArgs`. */
  const trainJob = async (name: string, policyArgs: ReadonlyArray<string>) => {
    const checkpointDir = mkdtempSync(join(tmpdir(), "t1-e2e-ckpt-"))
    const { jobId } = await client.submitJob({
      spec: smallTrainSpec(`e2e ${name}`, { ppoSteps: 2, criticWarmupSteps: 0 }),
    })
    await system.start({
      name,
      args: [
        "actor",
        "sampler",
        ...policyArgs,
        "--job",
        jobId,
        "--checkpoint-dir",
        checkpointDir,
        "--format",
        "shell-block",
        "--context-length",
        "1024",
        "--concurrency",
        "2",
      ],
    })
    const events: JobEvent[] = []
    for await (const e of client.watchJob({ jobId })) events.push(e)
    const { status } = await client.getJob({ jobId })
    const steps = events.flatMap((e) => (e.event.case === "learnerStep" ? [e.event.value] : []))
    return {
      state: status?.state,
      steps: steps.map((s) => Number(s.step)),
      dir: (v: string) => join(checkpointDir, jobId, `v${v}`),
    }
  }

  it("vLLM: each version reloaded into both replicas in order, no turn under a load; a failed reload keeps its replica paused and out until the retry", async () => {
    const [{ double: a, server: sa }, { double: b, server: sb }] = vllm
    b.failUpdates = 1
    try {
      const job = await trainJob("sampler-vllm", [
        "--policy",
        "vllm",
        "--engine-model",
        VLLM_MODEL,
        "--engine-url",
        `${sa.url},${sb.url}`,
      ])
      expect(job.state).toBe(JobState.SUCCEEDED)
      expect(job.steps).toEqual([1, 2])
      // The load of v2 is whole once its resume is logged.
      const holds2 = (d: VllmDouble) =>
        d.refits.includes("version 2") && d.refits.at(-1) === "resume"
      for (let waited = 0; !(holds2(a) && holds2(b)) && waited < 30_000; waited += 100)
        await new Promise((r) => setTimeout(r, 100))
      for (const d of [a, b]) {
        const loaded = d.refits.flatMap((r, i) => (r.startsWith("version ") ? [i] : []))
        const versions = loaded.map((i) => d.refits[i]?.split(" ")[1] ?? "")
        expect(versions.map(Number)).toEqual([...versions.map(Number)].sort((x, y) => x - y))
        expect(versions.at(-1)).toBe("2")
        for (const [k, i] of loaded.entries())
          expect(d.refits.slice(i - 2, i + 2)).toEqual([
            "pause wait",
            `reload ${job.dir(versions[k] ?? "")}`,
            `version ${versions[k]}`,
            "resume",
          ])
        let paused = false
        for (const line of d.log) {
          if (line.startsWith("pause")) paused = true
          if (line === "resume") paused = false
          if (line.startsWith("generate")) expect(paused).toBe(false)
        }
      }
      const refused = b.refits.findIndex((l) => l.startsWith("refused"))
      expect(refused).toBeGreaterThanOrEqual(0)
      expect(b.refits[refused + 1]).toBe("pause wait")
      // Turns after a load ran on the learner's checkpoints.
      const answered = [...a.log, ...b.log].filter((l) => l.startsWith("generate"))
      expect(answered.some((l) => l !== "generate initial")).toBe(true)
    } catch (e) {
      console.error(system.dump())
      throw e
    }
  }, 300_000)

  it("SGLang: loads each version into both replicas in order; a refused load keeps its replica out until the retry; turns carry the engine's version", async () => {
    const [{ double: a, server: sa }, { double: b, server: sb }] = replicas
    b.failUpdates = 1
    try {
      const job = await trainJob("sampler", [
        "--policy",
        "sglang",
        "--engine-url",
        `${sa.url},${sb.url}`,
      ])
      expect(job.state).toBe(JobState.SUCCEEDED)
      expect(job.steps).toEqual([1, 2])

      // The job ends at the announcement of its last version; the bridge loads it right after.
      const holds2 = (d: SglangDouble) =>
        d.refits.some((r) => r.startsWith("update") && r.endsWith(" 2")) &&
        d.refits.at(-1) === "continue"
      for (let waited = 0; !(holds2(a) && holds2(b)) && waited < 30_000; waited += 100)
        await new Promise((r) => setTimeout(r, 100))
      for (const d of [a, b]) {
        const loaded = d.refits.flatMap((r, i) => (r.startsWith("update") ? [i] : []))
        const versions = loaded.map((i) => d.refits[i]?.split(" ").at(-1) ?? "")
        expect(versions.map(Number)).toEqual([...versions.map(Number)].sort((x, y) => x - y))
        expect(versions.at(-1)).toBe("2")
        for (const [k, i] of loaded.entries()) {
          expect(d.refits[i]).toBe(`update ${job.dir(versions[k] ?? "")} ${versions[k]}`)
          expect([d.refits[i - 1], d.refits[i + 1]]).toEqual(["pause retract", "continue"])
        }
      }
      const refused = b.log.findIndex((l) => l.startsWith("refused"))
      const retried = b.log.findIndex((l, i) => i > refused && l.startsWith("update"))
      expect(refused).toBeGreaterThanOrEqual(0)
      expect(retried).toBeGreaterThan(refused)
      expect(b.log.slice(refused, retried).filter((l) => l.startsWith("generate"))).toEqual([])
      // Turns are answered with the version the replica holds; the learner's versions show up.
      const answered = [...a.log, ...b.log].filter((l) => l.startsWith("generate"))
      expect(answered.some((l) => l !== "generate default" && l !== "generate 0")).toBe(true)
    } catch (e) {
      console.error(system.dump())
      throw e
    }
  }, 300_000)
})
