import { existsSync, mkdtempSync, readdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Fiber } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { TinyMoe } from "../../model/index.ts"
import { Bus, MemoryBusLive, subjectsFor } from "../../services/bus/index.ts"
import { publishWeights } from "../../services/weights/index.ts"
import { Rotation, runEngineBridge } from "./engine-bridge.ts"
import {
  type SglangDouble,
  sglangDouble,
  type VllmDouble,
  vllmDouble,
} from "./policy/engine-double.ts"
import { replicatedBackend } from "./policy/replicas.ts"
import { sglangBackend } from "./policy/sglang.ts"
import { startTestServer, type TestServer } from "./policy/test-server.ts"
import { vllmBackend } from "./policy/vllm.ts"
import { sglangWeightSync, vllmWeightSync } from "./policy/weight-sync.ts"

/**
 * The engine bridge against two SGLang doubles: each announced version is exported as a Hugging
 * Face checkpoint and loaded into every replica by pause → update (path, version) → continue; a
 * refused or timed-out load keeps the replica out of rotation until a retry loads it; the engine
 * then reports the new version in its answers, which is what turns record.
 */
const doubles: SglangDouble[] = [
  sglangDouble(() => ({ tokens: [5, 6] })),
  sglangDouble(() => ({ tokens: [5, 6] })),
]
const servers: TestServer[] = []
beforeAll(async () => {
  for (const d of doubles) servers.push(await startTestServer(d.handler))
})
afterAll(() => Promise.all(servers.map((s) => s.close())))

const until = async (what: string, ok: () => boolean, ms = 20_000) => {
  const deadline = Date.now() + ms
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe("engine bridge (SGLang double)", () => {
  it("loads each version into every replica in order, keeps a failing one out of rotation and retries it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "t1-bridge-"))
    const subjects = subjectsFor("bridge")
    const rotation = new Rotation()
    const [a, b] = doubles as [SglangDouble, SglangDouble]
    const [sa, sb] = servers as [TestServer, TestServer]
    const replicas = [sa, sb].map((s) => sglangWeightSync({ baseUrl: s.url, timeoutMs: 500 }))
    const model = TinyMoe.create({ config: { vocabSize: 300 }, seed: 1 })
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          const bridge = yield* Effect.forkScoped(
            runEngineBridge({
              bus,
              subjects,
              job: "job-e",
              checkpointDir: dir,
              replicas,
              rotation,
              retryDelayMs: 50,
            }),
          )
          yield* Effect.sleep("100 millis")
          yield* publishWeights(bus, subjects, "job-e", model, 1n, 1n)
          yield* Effect.promise(() =>
            until(
              "v1 on both",
              () => rotation.versions.get(sa.url) === 1n && rotation.versions.get(sb.url) === 1n,
            ),
          )
          const v1 = join(dir, "job-e", "v1")
          expect(a.refits).toEqual(["pause retract", `update ${v1} 1`, "continue"])
          expect(b.refits).toEqual(["pause retract", `update ${v1} 1`, "continue"])
          expect(readdirSync(v1).sort()).toEqual([
            "config.json",
            "model-00001-of-00001.safetensors",
            "model.safetensors.index.json",
          ])

          // v2: replica b refuses twice and times out once before it loads.
          b.failUpdates = 2
          b.hangUpdates = 1
          yield* publishWeights(bus, subjects, "job-e", model, 2n, 2n)
          yield* Effect.promise(() => until("b out of rotation", () => !rotation.isIn(sb.url)))
          yield* Effect.promise(() =>
            until("v2 on both", () => rotation.versions.get(sb.url) === 2n),
          )
          const v2 = join(dir, "job-e", "v2")
          // Every attempt is pause → update → continue; the hung one and the refused ones failed.
          expect(b.refits.slice(3)).toEqual([
            "pause retract",
            `hang ${v2} 2`,
            "continue",
            "pause retract",
            `refused ${v2} 2`,
            "continue",
            "pause retract",
            `refused ${v2} 2`,
            "continue",
            "pause retract",
            `update ${v2} 2`,
            "continue",
          ])
          expect(a.refits.slice(3)).toEqual(["pause retract", `update ${v2} 2`, "continue"])
          expect(rotation.isIn(sa.url) && rotation.isIn(sb.url)).toBe(true)
          expect(b.paused).toBe(false)
          expect(existsSync(join(v2, "config.json"))).toBe(true)
          yield* Fiber.interrupt(bridge)
        }),
      ).pipe(Effect.provide(MemoryBusLive())),
    )

    // The engine reports the version it holds; the sampler's turns carry it.
    const versionNow = async () =>
      (
        await Effect.runPromise(
          sglangBackend({ baseUrl: sb.url, contextLength: 64 }).generate({
            sessionId: "s",
            ids: Uint32Array.of(1, 2, 3),
            sampling: { temperature: 1, topP: 1, maxTokens: 4, stopTokenIds: [] },
          }),
        )
      ).policyVersion
    expect(await versionNow()).toBe(2n)
    b.restart()
    // An engine restarted with its initial weights says so ("default": no version), never v2.
    expect(await versionNow()).toBe(0n)
  }, 60_000)
})

const vllms: VllmDouble[] = [
  vllmDouble("tiny", () => ({ tokens: [5, 6] })),
  vllmDouble("tiny", () => ({ tokens: [5, 6] })),
]
const vllmServers: TestServer[] = []
beforeAll(async () => {
  for (const d of vllms) vllmServers.push(await startTestServer(d.handler))
})
afterAll(() => Promise.all(vllmServers.map((s) => s.close())))

describe("engine bridge (vLLM double)", () => {
  it("drains, then pause → reload → version → resume; a failed reload stays paused and out until a retry loads; a restarted engine is found by the next turn and reloaded", async () => {
    const dir = mkdtempSync(join(tmpdir(), "t1-bridge-vllm-"))
    const subjects = subjectsFor("bridgevllm")
    const rotation = new Rotation()
    const [a, b] = vllms as [VllmDouble, VllmDouble]
    const [sa, sb] = vllmServers as [TestServer, TestServer]
    const replicas = [sa, sb].map((s) => vllmWeightSync({ baseUrl: s.url, timeoutMs: 500 }))
    // The sampler side, as `t1 actor sampler --policy vllm --checkpoint-dir` builds it.
    const policy = replicatedBackend(
      [sa, sb].map((s) => ({
        name: s.url,
        backend: vllmBackend({
          baseUrl: s.url,
          model: "tiny",
          contextLength: 64,
          policyVersion: () => rotation.versions.get(s.url) ?? 0n,
          confirmWeights: { onMismatch: () => rotation.stale(s.url) },
        }),
      })),
      { inRotation: rotation.isIn, turns: rotation },
    )
    const turn = (session: string) =>
      policy.generate({
        sessionId: session,
        ids: Uint32Array.of(1, 2, 3),
        sampling: { temperature: 1, topP: 1, maxTokens: 4, stopTokenIds: [] },
      })
    const model = TinyMoe.create({ config: { vocabSize: 300 }, seed: 1 })
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          // Before any load both replicas serve their initial weights as version 0.
          expect((yield* turn("s0")).policyVersion).toBe(0n)

          // A turn of ours in flight on a: the load must wait for it.
          rotation.started(sa.url)
          const bridge = yield* Effect.forkScoped(
            runEngineBridge({
              bus,
              subjects,
              job: "job-v",
              checkpointDir: dir,
              replicas,
              rotation,
              retryDelayMs: 50,
            }),
          )
          yield* Effect.sleep("100 millis")
          yield* publishWeights(bus, subjects, "job-v", model, 1n, 1n)
          yield* Effect.promise(() => until("b on v1", () => rotation.versions.get(sb.url) === 1n))
          yield* Effect.sleep("200 millis")
          expect(a.refits).toEqual([])
          expect(rotation.isIn(sa.url)).toBe(false)
          rotation.ended(sa.url)
          yield* Effect.promise(() => until("a on v1", () => rotation.versions.get(sa.url) === 1n))
          const v1 = join(dir, "job-v", "v1")
          for (const d of [a, b])
            expect(d.refits).toEqual(["pause wait", `reload ${v1}`, "version 1", "resume"])
          expect((yield* turn("s1")).policyVersion).toBe(1n)

          // v2: b's reload fails twice (500) and hangs once; it stays paused between attempts.
          b.failUpdates = 2
          b.hangUpdates = 1
          yield* publishWeights(bus, subjects, "job-v", model, 2n, 2n)
          yield* Effect.promise(() => until("b out", () => !rotation.isIn(sb.url)))
          yield* Effect.promise(() => until("b on v2", () => rotation.versions.get(sb.url) === 2n))
          const v2 = join(dir, "job-v", "v2")
          expect(b.refits.slice(4)).toEqual([
            "pause wait",
            `hang ${v2}`,
            "pause wait",
            `refused ${v2}`,
            "pause wait",
            `refused ${v2}`,
            "pause wait",
            `reload ${v2}`,
            "version 2",
            "resume",
          ])
          // No turn reached b while it was out (between its first pause and its resume).
          const from = b.log.indexOf("pause wait", b.log.indexOf("resume"))
          const to = b.log.lastIndexOf("resume")
          expect(b.log.slice(from, to).filter((l) => l.startsWith("generate"))).toEqual([])
          yield* Effect.promise(() => until("a on v2", () => rotation.versions.get(sa.url) === 2n))

          // b restarts on its initial weights: the next turn there fails (it reports no
          // version), b is reloaded with v2, and turns carry v2 again — never v2 on old weights.
          b.restart()
          const results = []
          for (let i = 0; i < 4; i++) results.push(yield* Effect.result(turn(`r${i}`)))
          const failed = results.filter((r) => r._tag === "Failure")
          expect(failed.length).toBeGreaterThanOrEqual(1)
          expect(String(failed[0]?._tag === "Failure" ? failed[0].failure.message : "")).toMatch(
            /reports weights v0 where v2 was loaded/,
          )
          yield* Effect.promise(() =>
            until("b reloaded", () => b.weights === v2 && rotation.isIn(sb.url)),
          )
          for (let i = 0; i < 4; i++) expect((yield* turn(`t${i}`)).policyVersion).toBe(2n)
          expect(b.log.filter((l) => l === "generate initial")).toHaveLength(1)
          yield* Fiber.interrupt(bridge)
        }),
      ).pipe(Effect.provide(MemoryBusLive())),
    )
  }, 60_000)
})
