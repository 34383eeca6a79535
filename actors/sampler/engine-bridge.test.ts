import { existsSync, mkdtempSync, readdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Fiber } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { TinyMoe } from "../../model/index.ts"
import { Bus, MemoryBusLive, subjectsFor } from "../../services/bus/index.ts"
import { publishWeights } from "../../services/weights/index.ts"
import { Rotation, runEngineBridge } from "./engine-bridge.ts"
import { type SglangDouble, sglangDouble } from "./policy/engine-double.ts"
import { sglangBackend } from "./policy/sglang.ts"
import { startTestServer, type TestServer } from "./policy/test-server.ts"
import { sglangWeightSync } from "./policy/weight-sync.ts"

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
