/**
 * A train job whose samplers use an SGLang engine (two replicas of a local double), with the
 * engine bridge keeping them on the job's weights: the learner's versions are exported as Hugging
 * Face checkpoints and loaded by pause → update_weights_from_disk (path, version) → continue, the
 * sampler's turns carry the version the engine reports once it loaded it, and a replica whose
 * load is refused is out of rotation (answers no turn) until the retry loads it. In one process
 * on the in-memory bus; sandboxes on the local driver.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { runBufferPool } from "../../actors/buffer/index.ts"
import { runCoordinator } from "../../actors/coordinator/index.ts"
import { runLearnerPool } from "../../actors/learner/index.ts"
import { startSandboxAndVerifier } from "../../actors/local.ts"
import { Rotation, runEngineBridge } from "../../actors/sampler/engine-bridge.ts"
import { runSampler, shellBlockShort } from "../../actors/sampler/index.ts"
import type { PolicyBackendShape } from "../../actors/sampler/policy/backend.ts"
import { replicatedBackend } from "../../actors/sampler/policy/replicas.ts"
import { sglangBackend } from "../../actors/sampler/policy/sglang.ts"
import { sglangWeightSync } from "../../actors/sampler/policy/weight-sync.ts"
import { BASE_IMAGE, wireTaskFor } from "../../actors/sandbox/index.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate } from "../../model/index.ts"
import { JobKind, JobState } from "../../proto/index.ts"
import { Bus, MemoryBusLive, subjectsFor } from "../../services/bus/index.ts"
import { jobServiceClient } from "../../services/gateway/client.ts"
import { serveGateway } from "../../services/gateway/index.ts"
import { JobStore, makeJobStore } from "../../services/jobs/index.ts"
import { MetricsLive } from "../../services/metrics/index.ts"
import { useSglangReplicas } from "../support/sglang-replicas.ts"

const TRAIN_DIR = fileURLToPath(new URL("../../tasks/bundled/train", import.meta.url))
const template = new ChatTemplate(loadBundledTokenizer())
const replicas = useSglangReplicas()

describe("train job on SGLang engines with the engine bridge", () => {
  it("loads every learner version into both replicas in order; turns carry the engine's version; a refused load keeps the replica out until its retry", async () => {
    const subjects = subjectsFor(`sync${Math.random().toString(36).slice(2, 7)}`)
    const checkpointDir = mkdtempSync(join(tmpdir(), "t1-sync-"))
    const [{ double: a, server: sa }, { double: b, server: sb }] = replicas
    // Replica b refuses its first load.
    b.failUpdates = 1
    const rotation = new Rotation()
    const versions: bigint[] = []
    const engines = replicatedBackend(
      [sa, sb].map((s) => ({
        name: s.url,
        backend: sglangBackend({ baseUrl: s.url, contextLength: 1024 }),
      })),
      { inRotation: rotation.isIn },
    )
    const policy: PolicyBackendShape = {
      ...engines,
      generate: (request) =>
        engines
          .generate(request)
          .pipe(Effect.tap((r) => Effect.sync(() => versions.push(r.policyVersion)))),
    }
    const result = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          yield* startSandboxAndVerifier(subjects, { concurrency: 2, driver: "local" })
          yield* Effect.forkScoped(
            runCoordinator({ subjects, resolveImage: () => Effect.succeed(BASE_IMAGE) }),
          )
          yield* Effect.forkScoped(runBufferPool({ subjects }))
          yield* Effect.forkScoped(
            runLearnerPool({ subjects, format: shellBlockShort, toWire: wireTaskFor("local") }),
          )
          const gateway = yield* serveGateway({ subjects, port: 0 })
          const client = jobServiceClient(gateway.address, { timeoutMs: 10_000 })
          const { jobId } = yield* Effect.promise(() =>
            client.submitJob({
              spec: {
                name: "engine sync",
                kind: JobKind.TRAIN,
                taskSet: TRAIN_DIR,
                taskIds: ["config-edit-easy-s1-000"],
                samplesPerTask: 2,
                maxConcurrentEpisodes: 2,
                sampling: { temperature: 1, topP: 1, maxTokens: 24 },
                limits: { maxTurns: 1, wallClockSec: 120 },
                learner: {
                  batchTrajectories: 2,
                  ppoSteps: 2,
                  maxStaleness: 2,
                  criticWarmupSteps: 0,
                },
              },
            }),
          )
          yield* Effect.forkScoped(
            runEngineBridge({
              bus,
              subjects,
              job: jobId,
              checkpointDir,
              replicas: [sa, sb].map((s) => sglangWeightSync({ baseUrl: s.url, timeoutMs: 5000 })),
              rotation,
              retryDelayMs: 200,
            }),
          )
          yield* Effect.forkScoped(
            runSampler({ subjects, policy, template, format: shellBlockShort, concurrency: 2 }),
          )
          const events = yield* Effect.promise(async () => {
            const out = []
            for await (const e of client.watchJob({ jobId })) out.push(e)
            return out
          })
          const { status } = yield* Effect.promise(() => client.getJob({ jobId }))
          client.close()
          return { jobId, events, status }
        }),
      ).pipe(
        Effect.provide(MetricsLive),
        Effect.provideServiceEffect(
          JobStore,
          Bus.use((bus) => makeJobStore(bus, subjects)),
        ),
        Effect.provide(MemoryBusLive()),
      ),
    )
    expect(result.status?.state).toBe(JobState.SUCCEEDED)
    const steps = result.events.flatMap((e) =>
      e.event.case === "learnerStep" ? [e.event.value] : [],
    )
    expect(steps.map((s) => Number(s.step))).toEqual([1, 2])

    // Each published version went to both replicas, in order, each as pause → update → continue.
    const dir = (v: string) => join(checkpointDir, result.jobId, `v${v}`)
    for (const d of [a, b]) {
      const loaded = d.refits.flatMap((r, i) => (r.startsWith("update") ? [i] : []))
      const versionsLoaded = loaded.map((i) => d.refits[i]?.split(" ").at(-1) ?? "")
      expect(versionsLoaded.at(-1)).toBe("2")
      expect(versionsLoaded.map(Number)).toEqual(
        [...versionsLoaded.map(Number)].sort((x, y) => x - y),
      )
      for (const [k, i] of loaded.entries()) {
        expect(d.refits[i]).toBe(`update ${dir(versionsLoaded[k] ?? "")} ${versionsLoaded[k]}`)
        expect([d.refits[i - 1], d.refits[i + 1]]).toEqual(["pause retract", "continue"])
      }
    }
    // Replica b: its first load refused, then retried and loaded; no turn in between.
    const refused = b.log.findIndex((l) => l.startsWith("refused"))
    const next = b.log.findIndex((l, i) => i > refused && l.startsWith("update"))
    expect(refused).toBeGreaterThanOrEqual(0)
    expect(next).toBeGreaterThan(refused)
    expect(b.log.slice(refused, next).filter((l) => l.startsWith("generate"))).toEqual([])

    // Turns sampled after a load carry the engine's version: the learner's latest ones appear.
    expect(Math.max(...versions.map(Number))).toBeGreaterThanOrEqual(1)
    expect(new Set(versions.map(Number)).size).toBeGreaterThan(1)
  }, 240_000)
})
