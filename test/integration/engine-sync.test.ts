/**
 * A train job whose samplers use an engine (two replicas of a local SGLang or vLLM double), with
 * the engine bridge keeping them on the job's weights: the learner's versions are exported as
 * Hugging Face checkpoints and loaded (SGLang: pause → update_weights_from_disk (path, version) →
 * continue; vLLM: pause → collective_rpc reload_weights (path) → update_weight_version →
 * resume), the sampler's turns carry the version the replica holds once it loaded it, and a
 * replica whose load is refused is out of rotation (answers no turn) until the retry loads it.
 * In one process on the in-memory bus; sandboxes on the local driver.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Rotation, runEngineBridge } from "../../actors/sampler/engine-bridge.ts"
import { runSampler, shellBlockShort } from "../../actors/sampler/index.ts"
import type { PolicyBackendShape } from "../../actors/sampler/policy/backend.ts"
import { type Replica, replicatedBackend } from "../../actors/sampler/policy/replicas.ts"
import { sglangBackend } from "../../actors/sampler/policy/sglang.ts"
import { vllmBackend } from "../../actors/sampler/policy/vllm.ts"
import {
  type EngineWeightSync,
  sglangWeightSync,
  vllmWeightSync,
} from "../../actors/sampler/policy/weight-sync.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate } from "../../model/index.ts"
import { JobState } from "../../proto/index.ts"
import { Bus, subjectsFor } from "../../services/bus/index.ts"
import { useSglangReplicas, useVllmReplicas, VLLM_MODEL } from "../support/engine-replicas.ts"
import { runInProcess } from "../support/in-process.ts"
import { startTrainJob } from "../support/train-system.ts"

const template = new ChatTemplate(loadBundledTokenizer())
const sglang = useSglangReplicas()
const vllm = useVllmReplicas()

/**
 * A two-step train job whose samplers use `replicas` (the engines, in rotation as the bridge
 * says) while the bridge loads each version through `syncs`; every turn's version is recorded.
 */
const trainOnEngines = (
  rotation: Rotation,
  replicas: ReadonlyArray<Replica>,
  syncs: ReadonlyArray<EngineWeightSync>,
  /** The bridge has loaded the job's last version into every replica (checked after the job). */
  loadedLast: () => boolean,
) => {
  const subjects = subjectsFor(`sync${Math.random().toString(36).slice(2, 7)}`)
  const checkpointDir = mkdtempSync(join(tmpdir(), "t1-sync-"))
  const versions: bigint[] = []
  const engines = replicatedBackend(replicas, { inRotation: rotation.isIn, turns: rotation })
  const policy: PolicyBackendShape = {
    ...engines,
    generate: (request) =>
      engines
        .generate(request)
        .pipe(Effect.tap((r) => Effect.sync(() => versions.push(r.policyVersion)))),
  }
  return runInProcess(
    subjects,
    Effect.gen(function* () {
      const bus = yield* Bus
      const { client, jobId } = yield* startTrainJob(subjects, "engine sync", 2)
      yield* Effect.forkScoped(
        runEngineBridge({
          bus,
          subjects,
          job: jobId,
          checkpointDir,
          replicas: syncs,
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
      // The job ends at the announcement of its last version; the bridge loads it right after.
      for (let waited = 0; !loadedLast() && waited < 30_000; waited += 100)
        yield* Effect.sleep("100 millis")
      client.close()
      const steps = events.flatMap((e) =>
        e.event.case === "learnerStep" ? [Number(e.event.value.step)] : [],
      )
      return {
        status,
        steps,
        versions,
        dir: (v: string) => join(checkpointDir, jobId, `v${v}`),
      }
    }),
  )
}

/** The versions a double's log loaded, in order, each at `loadedAt` of its refit sequence. */
const loadedVersions = (
  refits: ReadonlyArray<string>,
  loaded: (line: string) => string | undefined,
) =>
  refits.flatMap((r, i) => {
    const v = loaded(r)
    return v === undefined ? [] : [{ at: i, version: v }]
  })

describe("train job on engines with the engine bridge", () => {
  it("SGLang: loads every learner version into both replicas in order; turns carry the engine's version; a refused load keeps the replica out until its retry", async () => {
    const [{ double: a, server: sa }, { double: b, server: sb }] = sglang
    // Replica b refuses its first load.
    b.failUpdates = 1
    const rotation = new Rotation()
    const result = await trainOnEngines(
      rotation,
      [sa, sb].map((s) => ({
        name: s.url,
        backend: sglangBackend({ baseUrl: s.url, contextLength: 1024 }),
      })),
      [sa, sb].map((s) => sglangWeightSync({ baseUrl: s.url, timeoutMs: 5000 })),
      () => [a, b].every((d) => d.refits.at(-1) === "continue" && d.refits.at(-2)?.endsWith(" 2")),
    )
    expect(result.status?.state).toBe(JobState.SUCCEEDED)
    expect(result.steps).toEqual([1, 2])

    // Each published version went to both replicas, in order, each as pause → update → continue.
    for (const d of [a, b]) {
      const loaded = loadedVersions(d.refits, (r) =>
        r.startsWith("update") ? r.split(" ").at(-1) : undefined,
      )
      expect(loaded.at(-1)?.version).toBe("2")
      const numbers = loaded.map((l) => Number(l.version))
      expect(numbers).toEqual([...numbers].sort((x, y) => x - y))
      for (const { at, version } of loaded) {
        expect(d.refits[at]).toBe(`update ${result.dir(version)} ${version}`)
        expect([d.refits[at - 1], d.refits[at + 1]]).toEqual(["pause retract", "continue"])
      }
    }
    // Every load of a trained version changed every tensor the engine serves; v0 is the
    // directory the doubles were launched on.
    for (const d of [a, b]) {
      for (const l of d.loads)
        console.log(`load v${l.version}: ${l.changed} of ${l.served} served tensors changed`)
      for (const l of d.loads) expect(l.changed).toBe(l.version === "0" ? 0 : l.served)
    }
    // Replica b: its first load refused, then retried and loaded; no turn in between.
    const refused = b.log.findIndex((l) => l.startsWith("refused"))
    const next = b.log.findIndex((l, i) => i > refused && l.startsWith("update"))
    expect(refused).toBeGreaterThanOrEqual(0)
    expect(next).toBeGreaterThan(refused)
    expect(b.log.slice(refused, next).filter((l) => l.startsWith("generate"))).toEqual([])

    // Turns sampled after a load carry the engine's version: the learner's latest ones appear.
    expect(Math.max(...result.versions.map(Number))).toBeGreaterThanOrEqual(1)
    expect(new Set(result.versions.map(Number)).size).toBeGreaterThan(1)
  }, 240_000)

  it("vLLM: every version reloaded into both replicas in order with no turn under a load; turns carry the loaded version; a failed reload keeps the replica paused and out until its retry", async () => {
    const [{ double: a, server: sa }, { double: b, server: sb }] = vllm
    b.failUpdates = 1
    const rotation = new Rotation()
    const result = await trainOnEngines(
      rotation,
      [sa, sb].map((s) => ({
        name: s.url,
        backend: vllmBackend({
          baseUrl: s.url,
          model: VLLM_MODEL,
          contextLength: 1024,
          policyVersion: () => rotation.versions.get(s.url) ?? 0n,
          confirmWeights: { onMismatch: () => rotation.stale(s.url) },
        }),
      })),
      [sa, sb].map((s) => vllmWeightSync({ baseUrl: s.url, timeoutMs: 5000 })),
      () => [a, b].every((d) => d.refits.at(-1) === "resume" && d.refits.at(-2) === "version 2"),
    )
    expect(result.status?.state).toBe(JobState.SUCCEEDED)
    expect(result.steps).toEqual([1, 2])

    for (const d of [a, b]) {
      const loaded = loadedVersions(d.refits, (r) =>
        r.startsWith("version ") ? r.split(" ")[1] : undefined,
      )
      expect(loaded.at(-1)?.version).toBe("2")
      const numbers = loaded.map((l) => Number(l.version))
      expect(numbers).toEqual([...numbers].sort((x, y) => x - y))
      for (const { at, version } of loaded)
        expect(d.refits.slice(at - 2, at + 2)).toEqual([
          "pause wait",
          `reload ${result.dir(version)}`,
          `version ${version}`,
          "resume",
        ])
      // Generations name the checkpoint the engine held; none ran while it was paused.
      let paused = false
      for (const line of d.log) {
        if (line.startsWith("pause")) paused = true
        if (line === "resume") paused = false
        if (line.startsWith("generate")) expect(paused).toBe(false)
      }
    }
    // b's first reload failed: it stayed paused (no resume) until the retry reloaded.
    const refused = b.refits.findIndex((l) => l.startsWith("refused"))
    expect(refused).toBeGreaterThanOrEqual(0)
    expect(b.refits.slice(refused + 1, refused + 3)).toEqual([
      "pause wait",
      expect.stringMatching(/^reload /),
    ])

    // Each turn's version is the checkpoint its replica held when it generated (the double logs
    // the checkpoint it generated on; its initial weights are the job's v0).
    expect(Math.max(...result.versions.map(Number))).toBeGreaterThanOrEqual(1)
    expect(new Set(result.versions.map(Number)).size).toBeGreaterThan(1)
    const tally = (labels: ReadonlyArray<string>) => {
      const out = new Map<string, number>()
      for (const l of labels) out.set(l, (out.get(l) ?? 0) + 1)
      return out
    }
    const counts = tally(result.versions.map((v) => result.dir(String(v))))
    const generated = tally(
      [a, b].flatMap((d) =>
        d.log.flatMap((l) => {
          if (!l.startsWith("generate ")) return []
          const weights = l.slice("generate ".length)
          return [weights === "initial" ? result.dir("0") : weights]
        }),
      ),
    )
    expect(counts).toEqual(generated)
  }, 240_000)
})
