/**
 * Engines as users run them: every actor its own process on NATS and Docker, the samplers
 * started as `t1 actor sampler --policy sglang --engine-url A,B --job JOB --checkpoint-dir DIR`
 * against two SGLang doubles served by this test. A train job for two learner steps: each
 * version the learner publishes is exported under DIR and loaded into both replicas (pause →
 * update_weights_from_disk with path and version → continue); one replica refuses its first
 * load and answers no turn until the bridge's retry loads it; turns after a load are answered
 * with the new version.
 */

import { randomUUID } from "node:crypto"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import Dockerode from "dockerode"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { SglangDouble } from "../../actors/sampler/policy/engine-double.ts"
import { type JobEvent, JobKind, JobState } from "../../proto/index.ts"
import { type JobServiceClient, jobServiceClient } from "../../services/gateway/client.ts"
import { useNatsServer } from "../support/nats-url.ts"
import { useSglangReplicas } from "../support/sglang-replicas.ts"
import { freePort, type System, startSystem } from "../support/system.ts"

const TRAIN_DIR = fileURLToPath(new URL("../../tasks/bundled/train", import.meta.url))
const nats = useNatsServer()
const docker = new Dockerode()
const owner = `e2e-engine-${randomUUID().slice(0, 8)}`

describe("train job on SGLang engines, every actor a process", () => {
  let system: System
  let client: JobServiceClient
  const replicas = useSglangReplicas()

  beforeAll(async () => {
    system = startSystem({ natsUrl: nats.url, prefix: `eng${randomUUID().slice(0, 6)}` })
    const listen = await freePort()
    for (const member of [
      { name: "gateway", args: ["gateway", "--listen", `127.0.0.1:${listen}`] },
      { name: "coordinator", args: ["actor", "coordinator", "--lease-ttl-ms", "3000"] },
      {
        name: "sandbox",
        args: ["actor", "sandbox", "--driver", "docker", "--owner", owner, "--concurrency", "8"],
      },
      { name: "verifier", args: ["actor", "verifier", "--concurrency", "4"] },
      { name: "buffer", args: ["actor", "buffer", "--lease-ttl-ms", "3000"] },
      { name: "learner", args: ["actor", "learner", "--lease-ttl-ms", "3000"] },
    ])
      await system.start(member)
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

  it("loads each version into both replicas in order; a refused load keeps its replica out until the retry; turns carry the engine's version", async () => {
    const [{ double: a, server: sa }, { double: b, server: sb }] = replicas
    b.failUpdates = 1
    const checkpointDir = mkdtempSync(join(tmpdir(), "t1-e2e-ckpt-"))
    try {
      const { jobId } = await client.submitJob({
        spec: {
          name: "e2e engine",
          kind: JobKind.TRAIN,
          taskSet: TRAIN_DIR,
          taskIds: ["config-edit-easy-s1-000"],
          samplesPerTask: 2,
          maxConcurrentEpisodes: 2,
          sampling: { temperature: 1, topP: 1, maxTokens: 24 },
          limits: { maxTurns: 1, wallClockSec: 120 },
          learner: { batchTrajectories: 2, ppoSteps: 2, maxStaleness: 2, criticWarmupSteps: 0 },
        },
      })
      await system.start({
        name: "sampler",
        args: [
          "actor",
          "sampler",
          "--policy",
          "sglang",
          "--engine-url",
          `${sa.url},${sb.url}`,
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
      expect(status?.state).toBe(JobState.SUCCEEDED)
      const steps = events.flatMap((e) => (e.event.case === "learnerStep" ? [e.event.value] : []))
      expect(steps.map((s) => Number(s.step))).toEqual([1, 2])

      // The job ends at the announcement of its last version; the bridge loads it right after.
      const holds2 = (d: SglangDouble) =>
        d.refits.some((r) => r.startsWith("update") && r.endsWith(" 2"))
      for (let waited = 0; !(holds2(a) && holds2(b)) && waited < 30_000; waited += 100)
        await new Promise((r) => setTimeout(r, 100))
      for (const d of [a, b]) {
        const loaded = d.refits.flatMap((r, i) => (r.startsWith("update") ? [i] : []))
        const versions = loaded.map((i) => d.refits[i]?.split(" ").at(-1) ?? "")
        expect(versions.map(Number)).toEqual([...versions.map(Number)].sort((x, y) => x - y))
        expect(versions.at(-1)).toBe("2")
        for (const [k, i] of loaded.entries()) {
          expect(d.refits[i]).toBe(
            `update ${join(checkpointDir, jobId, `v${versions[k]}`)} ${versions[k]}`,
          )
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
