/**
 * Versions that tell the truth, against SGLang doubles that behave like the real server: a train
 * job whose samplers use two replicas launched on the job's initial TinyMoE directory (Hugging
 * Face names), each load taking 5 s and each token 2 s (a turn outlasts a learner step), so turns are in flight when the
 * bridge pauses a replica (retract), loads and continues. It shows:
 * - every load of a trained version changes every tensor the engine serves (the double counts
 *   them; printed); the learner's v0 is the launch directory itself, whose load changes none;
 * - a turn that straddles a load carries the oldest version that generated its tokens: the
 *   versions the sampler recorded are, replica by replica, the oldest run of each answer's
 *   `weight_versions`, and at least one answer has runs under two versions;
 * - no episode fails or is re-run because of a load (turns that arrive meanwhile wait);
 * - a replica restarted on its launch weights mid-job is reloaded before it serves the job
 *   again: whatever it answered from the launch weights after the restart was refused, never
 *   recorded.
 * In one process on the in-memory bus; sandboxes on the local driver.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { exportCheckpoint, Rotation, runEngineBridge } from "../../actors/sampler/engine-bridge.ts"
import { runSampler, shellBlockShort } from "../../actors/sampler/index.ts"
import type { PolicyBackendShape } from "../../actors/sampler/policy/backend.ts"
import { type SglangDouble, sglangDouble } from "../../actors/sampler/policy/engine-double.ts"
import { replicatedBackend } from "../../actors/sampler/policy/replicas.ts"
import { sglangBackend } from "../../actors/sampler/policy/sglang.ts"
import { startTestServer, type TestServer } from "../../actors/sampler/policy/test-server.ts"
import { sglangWeightSync } from "../../actors/sampler/policy/weight-sync.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate, encodeWeights, TinyMoe } from "../../model/index.ts"
import { JobState } from "../../proto/index.ts"
import { Bus, subjectsFor } from "../../services/bus/index.ts"
import { runInProcess } from "../support/in-process.ts"
import { startTrainJob } from "../support/train-system.ts"

const LOAD_MS = 5000
const TOKEN_MS = 2000
const tokenizer = loadBundledTokenizer()
const template = new ChatTemplate(tokenizer)
const shellTurn = [...tokenizer.encode("```bash\necho hi\n```"), ...template.endOfTurn]

interface Replica {
  readonly double: SglangDouble
  server: TestServer
}
const replicas: Replica[] = []

beforeAll(async () => {
  // The engines are launched on the job's starting point: TinyMoE from seed 0 (tinymoe:init).
  const launchRoot = mkdtempSync(join(tmpdir(), "t1-launch-"))
  const initial = TinyMoe.create({ config: { vocabSize: tokenizer.vocabSize }, seed: 0 })
  const launch = await Effect.runPromise(
    exportCheckpoint(launchRoot, "init", 0n, encodeWeights(initial)),
  )
  for (let i = 0; i < 2; i++) {
    const double = sglangDouble(() => ({ tokens: shellTurn }), {
      launchDir: launch.path,
      loadMs: LOAD_MS,
      tokenMs: TOKEN_MS,
    })
    replicas.push({ double, server: await startTestServer(double.handler) })
  }
}, 60_000)
afterAll(() => Promise.all(replicas.map((r) => r.server.close())))

/** One recorded turn: the replica, its context and the version the sampler gave it. */
interface Recorded {
  readonly replica: string
  readonly key: string
}

const keyOf = (ids: ReadonlyArray<number>, version: string) => `${ids.join(",")}|${version}`

const tally = (keys: ReadonlyArray<string>) => {
  const out = new Map<string, number>()
  for (const k of keys) out.set(k, (out.get(k) ?? 0) + 1)
  return out
}

describe("engine versions under asynchrony (SGLang doubles, 5 s loads)", () => {
  it("every load changes every served tensor; straddling turns carry the oldest version; no episode fails because of a load; a restarted replica is reloaded before it serves", async () => {
    const [ra, rb] = replicas as [Replica, Replica]
    const rotation = new Rotation()
    const recorded: Recorded[] = []
    const refused: Recorded[] = []
    const subjects = subjectsFor(`ver${Math.random().toString(36).slice(2, 7)}`)
    const checkpointDir = mkdtempSync(join(tmpdir(), "t1-versions-"))
    let restartedAt = -1
    const policy: PolicyBackendShape = replicatedBackend(
      replicas.map(({ server }) => {
        const url = server.url
        const backend = sglangBackend({
          baseUrl: url,
          contextLength: 1024,
          policyVersion: () => rotation.versions.get(url) ?? 0n,
          confirmWeights: {
            loaded: () => rotation.versions.get(url),
            onMismatch: () => rotation.stale(url),
          },
        })
        return {
          name: url,
          backend: {
            ...backend,
            generate: (request) =>
              backend.generate(request).pipe(
                Effect.tap((r) =>
                  Effect.sync(() =>
                    recorded.push({
                      replica: url,
                      key: keyOf([...request.ids], r.policyVersion.toString()),
                    }),
                  ),
                ),
                Effect.tapError((e) =>
                  Effect.sync(() => {
                    if (/weights "default" where v\d+ was loaded/.test(e.message))
                      refused.push({ replica: url, key: keyOf([...request.ids], "default") })
                  }),
                ),
              ),
          },
        }
      }),
      { inRotation: rotation.isIn, turns: rotation },
    )
    const result = await runInProcess(
      subjects,
      Effect.gen(function* () {
        const bus = yield* Bus
        const { client, jobId } = yield* startTrainJob(subjects, "engine versions", 3)
        yield* Effect.forkScoped(
          runEngineBridge({
            bus,
            subjects,
            job: jobId,
            checkpointDir,
            replicas: replicas.map(({ server }) =>
              sglangWeightSync({ baseUrl: server.url, timeoutMs: 60_000 }),
            ),
            rotation,
            retryDelayMs: 200,
            checkEveryMs: 500,
          }),
        )
        yield* Effect.forkScoped(
          runSampler({ subjects, policy, template, format: shellBlockShort, concurrency: 2 }),
        )
        // Replica b restarts on its launch weights once it holds v1.
        yield* Effect.forkScoped(
          Effect.gen(function* () {
            while (rotation.versions.get(rb.server.url) !== 1n || !rotation.isIn(rb.server.url))
              yield* Effect.sleep("50 millis")
            restartedAt = rb.double.loads.length
            rb.double.restart()
          }),
        )
        const events = yield* Effect.promise(async () => {
          const out = []
          for await (const e of client.watchJob({ jobId })) out.push(e)
          return out
        })
        const { status } = yield* Effect.promise(() => client.getJob({ jobId }))
        // The job ends at its last announcement; the bridge loads it right after.
        const last = BigInt(events.filter((e) => e.event.case === "learnerStep").length)
        for (
          let waited = 0;
          replicas.some(
            ({ server }) =>
              rotation.versions.get(server.url) !== last || !rotation.isIn(server.url),
          ) && waited < 60_000;
          waited += 100
        )
          yield* Effect.sleep("100 millis")
        client.close()
        return { status, last }
      }),
    )

    expect(result.status?.state).toBe(JobState.SUCCEEDED)
    // No episode failed or was re-run: loads made turns wait, never fail.
    expect(result.status?.counts?.episodesFailed).toBe(0)
    expect(result.status?.counts?.episodesInfraRetried).toBe(0)

    for (const [name, { double }] of [
      ["a", ra],
      ["b", rb],
    ] as const) {
      for (const l of double.loads)
        console.log(
          `replica ${name}: load v${l.version}: ${l.changed} of ${l.served} served tensors changed (${l.skipped.length} skipped)`,
        )
      // The learner announces v0, the directory the engines were launched on: loading it changes
      // nothing (the double notes such a load); every version the learner trained changes all.
      const [v0, trained] = [
        double.loads.filter((l) => l.version === "0"),
        double.loads.filter((l) => l.version !== "0"),
      ]
      for (const l of v0) expect(l.changed).toBe(0)
      expect(double.errors).toHaveLength(v0.length)
      expect(trained.length).toBeGreaterThanOrEqual(Number(result.last))
      for (const l of trained) {
        expect(l.changed).toBe(l.served)
        expect(l.skipped).toEqual([])
      }
      expect(double.paused).toBe(false)
    }

    // Each replica's recorded turns are its answers, each under the oldest version of its runs;
    // answers from the launch weights after a load were refused instead.
    const straddled = replicas.flatMap(({ double }) =>
      double.calls.filter(
        (c) =>
          new Set((c.weightVersions ?? []).filter((r) => r.end > r.start).map((r) => r.version))
            .size > 1,
      ),
    )
    console.log(
      `${recorded.length} turns recorded, ${straddled.length} straddled a load, ${refused.length} refused (launch weights after a restart)`,
    )
    for (const c of straddled)
      console.log(
        `straddled: runs ${JSON.stringify(c.weightVersions)} → recorded under v${Math.min(...(c.weightVersions ?? []).map((r) => Number(r.version)))}`,
      )
    expect(straddled.length).toBeGreaterThanOrEqual(1)
    for (const { double, server } of replicas) {
      // A restart drops the requests it was running (answered as aborted): no turn came of them.
      const answered = double.calls
        .filter((c) => c.finish !== "abort")
        .map((c) => {
          const runs = (c.weightVersions ?? []).filter((s) => s.end > s.start)
          const numeric = runs.map((s) => s.version).filter((v) => /^\d+$/.test(v))
          const oldest =
            numeric.length < runs.length ? "default" : String(Math.min(...numeric.map(Number)))
          return keyOf(c.inputIds, oldest)
        })
      const mine = [
        ...recorded.filter((r) => r.replica === server.url),
        ...refused.filter((r) => r.replica === server.url),
      ].map((r) => r.key)
      // The launch weights ("default") are the job's v0: the learner's first version loads them.
      const asV0 = (k: string) => k.replace(/\|default$/, "|0")
      expect(tally(answered.map(asV0))).toEqual(tally(mine.map(asV0)))
    }

    // The restarted replica: reloaded (every tensor changed again) before it served; nothing it
    // answered from its launch weights after the restart was recorded.
    expect(restartedAt).toBeGreaterThanOrEqual(1)
    const reload = rb.double.loads[restartedAt]
    expect(reload?.changed).toBe(reload?.served)
    expect(
      recorded.filter((r) => r.replica === rb.server.url && r.key.endsWith("|default")),
    ).toEqual([])
  }, 400_000)
})
