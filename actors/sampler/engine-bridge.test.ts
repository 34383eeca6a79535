import { mkdtempSync, readdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Fiber } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { encodeWeights, TinyMoe } from "../../model/index.ts"
import { Bus, MemoryBusLive, subjectsFor } from "../../services/bus/index.ts"
import { publishWeights } from "../../services/weights/index.ts"
import { exportCheckpoint, Rotation, runEngineBridge } from "./engine-bridge.ts"
import {
  type SglangDouble,
  type SglangDoubleOptions,
  sglangDouble,
  type VllmDouble,
  vllmDouble,
} from "./policy/engine-double.ts"
import { replicatedBackend } from "./policy/replicas.ts"
import { sglangBackend } from "./policy/sglang.ts"
import { startTestServer, type TestServer } from "./policy/test-server.ts"
import { vllmBackend } from "./policy/vllm.ts"
import { type EngineWeightSync, sglangWeightSync, vllmWeightSync } from "./policy/weight-sync.ts"

/**
 * The engine bridge against two SGLang doubles launched on a TinyMoE model directory (Hugging
 * Face names): each announced version is exported and loaded into every replica by pause (mode
 * from the server's version) → update (path, version) → confirm (`/get_weight_version`, one
 * tensor read back) → continue; a refused (HTTP 400 or 200 + success false) or timed-out load
 * keeps the replica out of rotation until a retry loads it; an engine that reports success but
 * changed nothing stays out; a restarted engine is found and reloaded.
 */
/** A TinyMoE of `seed` whose norm gains differ from every other seed's too (all 1 at init). */
const distinctModel = (seed: number) => {
  const model = TinyMoe.create({ config: { vocabSize: 300 }, seed })
  const gain = 1 + seed / 64
  for (const layer of model.params.layers)
    for (const norm of [layer.attnNorm, layer.ffnNorm, layer.qNorm, layer.kNorm]) norm.fill(gain)
  model.params.finalNorm.fill(gain)
  return model
}
const launch = (() => {
  const dir = mkdtempSync(join(tmpdir(), "t1-launch-"))
  const model = distinctModel(7)
  return {
    dir,
    ready: Effect.runPromise(exportCheckpoint(dir, "launch", 0n, encodeWeights(model))).then(
      (c) => c.path,
    ),
  }
})()
const modelAt = (v: bigint) => distinctModel(Number(v))

const until = async (what: string, ok: () => boolean, ms = 20_000) => {
  const deadline = Date.now() + ms
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}
const wait = (what: string, ok: () => boolean, ms?: number) =>
  Effect.promise(() => until(what, ok, ms))

/** Two SGLang doubles on the launch directory, their servers and weight syncs. */
const sglangPair = async (options: Omit<SglangDoubleOptions, "launchDir"> = {}) => {
  const launchDir = await launch.ready
  const doubles = [0, 1].map(() =>
    sglangDouble(() => ({ tokens: [5, 6, 7, 8] }), { ...options, launchDir }),
  )
  const servers = await Promise.all(doubles.map((d) => startTestServer(d.handler)))
  return {
    doubles: doubles as [SglangDouble, SglangDouble],
    servers: servers as [TestServer, TestServer],
  }
}
const closing: TestServer[] = []
afterAll(() => Promise.all(closing.map((s) => s.close())))

/** Runs the bridge over `syncs` for `job` on an in-memory bus while `body` publishes versions. */
const withBridge = (
  job: string,
  syncs: ReadonlyArray<EngineWeightSync>,
  rotation: Rotation,
  body: (
    publish: (version: bigint) => Effect.Effect<unknown, unknown>,
  ) => Effect.Effect<void, unknown>,
  extra: { readonly checkEveryMs?: number } = {},
) => {
  const dir = mkdtempSync(join(tmpdir(), "t1-bridge-"))
  const subjects = subjectsFor(`b${Math.random().toString(36).slice(2, 7)}`)
  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const bus = yield* Bus
        const bridge = yield* Effect.forkScoped(
          runEngineBridge({
            bus,
            subjects,
            job,
            checkpointDir: dir,
            replicas: syncs,
            rotation,
            retryDelayMs: 50,
            checkEveryMs: extra.checkEveryMs ?? 0,
          }),
        )
        yield* Effect.sleep("100 millis")
        yield* body((v) => publishWeights(bus, subjects, job, modelAt(v), v, v))
        yield* Fiber.interrupt(bridge)
      }),
    ).pipe(Effect.provide(MemoryBusLive())),
  ).then(() => dir)
}

/** The paths of requests of `server` other than generation, in order. */
const calls = (server: TestServer) =>
  server.received.filter((r) => r.path !== "/generate").map((r) => `${r.method} ${r.path}`)

const turnOn = (url: string, rotation: Rotation) =>
  sglangBackend({
    baseUrl: url,
    contextLength: 64,
    policyVersion: () => rotation.versions.get(url) ?? 0n,
    confirmWeights: {
      loaded: () => rotation.versions.get(url),
      onMismatch: () => rotation.stale(url),
    },
  }).generate({
    sessionId: "s",
    ids: Uint32Array.of(1, 2, 3),
    sampling: { temperature: 1, topP: 1, maxTokens: 4, stopTokenIds: [] },
  })

describe("engine bridge (SGLang double)", () => {
  it("loads and confirms each version in every replica (every served tensor changed); refusals (400, 200 + success false) and a timeout keep the replica out until a retry loads it", async () => {
    const {
      doubles: [a, b],
      servers: [sa, sb],
    } = await sglangPair()
    closing.push(sa, sb)
    const rotation = new Rotation()
    const syncs = [sa, sb].map((s) => sglangWeightSync({ baseUrl: s.url, timeoutMs: 500 }))
    const dir = await withBridge("job-e", syncs, rotation, (publish) =>
      Effect.gen(function* () {
        yield* publish(1n)
        yield* wait(
          "v1 on both",
          () => rotation.versions.get(sa.url) === 1n && rotation.versions.get(sb.url) === 1n,
        )
        for (const [d, s] of [
          [a, sa],
          [b, sb],
        ] as const) {
          expect(d.refits).toEqual(["pause retract", `update ${d.loads[0]?.path} 1`, "continue"])
          // The server's version picks the pause mode; the load is confirmed while paused.
          expect(calls(s)).toEqual([
            "GET /get_server_info",
            "POST /pause_generation",
            "POST /update_weights_from_disk",
            "GET /get_weight_version",
            "POST /get_weights_by_name",
            "POST /continue_generation",
          ])
          expect(s.sent(4)).toEqual({ name: "model.layers.0.mlp.gate.weight", truncate_size: 8 })
          expect(d.loads[0]?.changed).toBe(d.weights.size)
          expect(d.loads[0]?.skipped).toEqual([])
        }
        console.log(`v1: ${a.loads[0]?.changed} of ${a.weights.size} served tensors changed`)

        // v2: b refuses twice (HTTP 400) and times out once before it loads.
        b.failUpdates = 2
        b.hangUpdates = 1
        yield* publish(2n)
        yield* wait("b out of rotation", () => !rotation.isIn(sb.url))
        yield* wait("v2 on b", () => rotation.versions.get(sb.url) === 2n)
        const v2 = b.loads[1]?.path
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
        yield* wait("v2 on a", () => rotation.versions.get(sa.url) === 2n)

        // v3: a refuses once as servers that answer 200 with success false do.
        a.refusalStatus = 200
        a.failUpdates = 1
        yield* publish(3n)
        yield* wait(
          "v3 on both",
          () => rotation.versions.get(sa.url) === 3n && rotation.versions.get(sb.url) === 3n,
        )
        expect(a.refits.filter((r) => r.endsWith(" 3"))).toEqual([
          `refused ${a.loads[2]?.path} 3`,
          `update ${a.loads[2]?.path} 3`,
        ])
        for (const d of [a, b]) {
          expect(d.loads.map((l) => l.changed)).toEqual([
            d.weights.size,
            d.weights.size,
            d.weights.size,
          ])
          expect(d.errors).toEqual([])
        }
        expect(rotation.isIn(sa.url) && rotation.isIn(sb.url)).toBe(true)
        expect(b.paused).toBe(false)
      }),
    )
    expect(readdirSync(join(dir, "job-e", "v1")).sort()).toEqual([
      "config.json",
      "critic",
      "model-00001-of-00001.safetensors",
      "model.safetensors.index.json",
    ])
    // The engine reports the version it holds; the sampler's turns carry it.
    const plain = (url: string) =>
      sglangBackend({ baseUrl: url, contextLength: 64 }).generate({
        sessionId: "s",
        ids: Uint32Array.of(1, 2, 3),
        sampling: { temperature: 1, topP: 1, maxTokens: 4, stopTokenIds: [] },
      })
    expect((await Effect.runPromise(plain(sb.url))).policyVersion).toBe(3n)
    b.restart()
    expect((await Effect.runPromise(plain(sb.url))).policyVersion).toBe(0n)
  }, 60_000)

  it("an engine that reports success but changes nothing: WeightsNotLoaded naming /get_weights_by_name, not retried, the replica out of rotation until a later version confirms", async () => {
    const {
      doubles: [, b],
      servers: [sa, sb],
    } = await sglangPair()
    closing.push(sa, sb)
    const rotation = new Rotation()
    const syncs = [sa, sb].map((s) => sglangWeightSync({ baseUrl: s.url, timeoutMs: 2000 }))
    const failures: string[] = []
    const watched: EngineWeightSync[] = syncs.map((sync) => ({
      ...sync,
      update: (c) =>
        sync
          .update(c)
          .pipe(
            Effect.tapError((e) => Effect.sync(() => failures.push(`${e._tag}: ${e.message}`))),
          ),
    }))
    await withBridge("job-n", watched, rotation, (publish) =>
      Effect.gen(function* () {
        b.ignoreLoads = true
        yield* publish(1n)
        yield* wait("v1 on a", () => rotation.versions.get(sa.url) === 1n)
        yield* wait("b's load answered", () => failures.length === 1)
        yield* Effect.sleep("300 millis")
        expect(failures).toHaveLength(1)
        expect(failures[0]).toMatch(
          /^WeightsNotLoaded: .*the engine reported success but \/get_weights_by_name shows it did not load them: model\.layers\.0\.mlp\.gate\.weight holds /,
        )
        expect(b.refits.filter((r) => r.startsWith("update"))).toHaveLength(1)
        expect(b.errors).toHaveLength(1)
        expect(rotation.isIn(sb.url)).toBe(false)
        expect(rotation.versions.get(sb.url)).toBeUndefined()
        // Turns go to a only.
        expect((yield* turnOn(sa.url, rotation)).policyVersion).toBe(1n)

        b.ignoreLoads = false
        yield* publish(2n)
        yield* wait("v2 on b", () => rotation.versions.get(sb.url) === 2n && rotation.isIn(sb.url))
        expect(b.loads.at(-1)?.changed).toBe(b.weights.size)
      }),
    )
  }, 60_000)

  it("on SGLang before pause modes (0.5.5) does not pause (its pause aborts): the load waits for the running turn, which keeps one version", async () => {
    const {
      doubles: [a],
      servers: [sa, sb],
    } = await sglangPair({ serverVersion: "0.5.5", pauseModes: false, tokenMs: 60 })
    closing.push(sa, sb)
    const rotation = new Rotation()
    await withBridge("job-o", [sglangWeightSync({ baseUrl: sa.url })], rotation, (publish) =>
      Effect.gen(function* () {
        yield* publish(1n)
        yield* wait("v1", () => rotation.versions.get(sa.url) === 1n)
        const turn = yield* Effect.forkChild(turnOn(sa.url, rotation))
        yield* wait("the turn running", () => a.running === 1)
        yield* publish(2n)
        const result = yield* Fiber.join(turn)
        expect(result.policyVersion).toBe(1n)
        yield* wait("v2", () => rotation.versions.get(sa.url) === 2n)
        expect(a.refits).toEqual([`update ${a.loads[0]?.path} 1`, `update ${a.loads[1]?.path} 2`])
        expect(a.calls.map((c) => c.weightVersions)).toEqual([[{ version: "1", start: 0, end: 4 }]])
      }),
    )
  }, 60_000)

  it("a turn retracted by the pause and resumed on the new weights carries the oldest version", async () => {
    const {
      doubles: [a],
      servers: [sa, sb],
    } = await sglangPair({ tokenMs: 80, loadMs: 300 })
    closing.push(sa, sb)
    const rotation = new Rotation()
    await withBridge("job-r", [sglangWeightSync({ baseUrl: sa.url })], rotation, (publish) =>
      Effect.gen(function* () {
        yield* publish(1n)
        yield* wait("v1", () => rotation.versions.get(sa.url) === 1n)
        const turn = yield* Effect.forkChild(turnOn(sa.url, rotation))
        yield* wait("a token generated", () => a.running === 1)
        yield* Effect.sleep("100 millis")
        yield* publish(2n)
        const result = yield* Fiber.join(turn)
        const spans = a.calls[0]?.weightVersions ?? []
        expect(spans.map((s) => s.version)).toEqual(["1", "2"])
        expect(result.policyVersion).toBe(1n)
      }),
    )
  }, 60_000)

  it("a turn that reaches a replica restarted on its launch weights fails retryably and the replica is reloaded before it takes another", async () => {
    const {
      doubles: [a],
      servers: [sa, sb],
    } = await sglangPair({ loadMs: 200 })
    closing.push(sa, sb)
    const rotation = new Rotation()
    await withBridge("job-s", [sglangWeightSync({ baseUrl: sa.url })], rotation, (publish) =>
      Effect.gen(function* () {
        yield* publish(1n)
        yield* wait("v1", () => rotation.versions.get(sa.url) === 1n)
        a.restart()
        const first = yield* Effect.result(turnOn(sa.url, rotation))
        expect(first._tag).toBe("Failure")
        if (first._tag === "Failure") {
          expect(first.failure.retryable).toBe(true)
          expect(first.failure.message).toMatch(/weights "default" where v1 was loaded/)
        }
        yield* wait("reloaded", () => a.loads.length === 2 && rotation.isIn(sa.url))
        expect(a.loads[1]?.changed).toBe(a.weights.size)
        expect((yield* turnOn(sa.url, rotation)).policyVersion).toBe(1n)
      }),
    )
  }, 60_000)

  it("checks the replicas in rotation every checkEveryMs: one restarted on its launch weights is taken out and reloaded with no turn sent to it", async () => {
    const {
      doubles: [a],
      servers: [sa, sb],
    } = await sglangPair({ loadMs: 200 })
    closing.push(sa, sb)
    const rotation = new Rotation()
    await withBridge(
      "job-c",
      [sglangWeightSync({ baseUrl: sa.url })],
      rotation,
      (publish) =>
        Effect.gen(function* () {
          yield* publish(1n)
          yield* wait("v1", () => rotation.versions.get(sa.url) === 1n)
          a.restart()
          yield* wait("out", () => !rotation.isIn(sa.url), 5000)
          yield* wait("reloaded", () => a.loads.length === 2 && rotation.isIn(sa.url))
          expect(a.weightVersion).toBe("1")
          expect(a.loads[1]?.changed).toBe(a.weights.size)
          expect(a.calls).toEqual([])
        }),
      { checkEveryMs: 100 },
    )
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

describe("sglangWeightSync", () => {
  const exported = async (v: bigint) =>
    (
      await Effect.runPromise(
        exportCheckpoint(
          mkdtempSync(join(tmpdir(), "t1-rb-")),
          "job",
          v,
          encodeWeights(distinctModel(Number(v))),
        ),
      )
    ).path
  const readBacks = (s: TestServer) =>
    s.received.filter((r) => r.path === "/get_weights_by_name").length
  const outcome = (e: Effect.Effect<void, { readonly _tag: string; readonly message: string }>) =>
    Effect.runPromise(
      e.pipe(
        Effect.as("ok"),
        Effect.catch((x) => Effect.succeed(`${x._tag}: ${x.message}`)),
      ),
    )

  it('"auto": an engine that never answered a read-back (400) is confirmed by version only; once it has, a 400 fails the load', async () => {
    const bare = sglangDouble(() => ({ tokens: [5] }))
    const server = await startTestServer(bare.handler)
    closing.push(server)
    const sync = sglangWeightSync({ baseUrl: server.url })
    expect(await outcome(sync.update({ path: await exported(1n), version: 1n }))).toBe("ok")
    expect(await outcome(sync.update({ path: await exported(2n), version: 2n }))).toBe("ok")
    expect(readBacks(server)).toBe(2)

    const { doubles, servers } = await sglangPair()
    closing.push(...servers)
    const offered = sglangWeightSync({ baseUrl: servers[0].url })
    expect(await outcome(offered.update({ path: await exported(1n), version: 1n }))).toBe("ok")
    // The engine now serves a model without those names: the load changes nothing.
    doubles[0].weights.reset(new Map())
    expect(await outcome(offered.update({ path: await exported(2n), version: 2n }))).toMatch(
      /^WeightsNotLoaded: .*\/get_weights_by_name shows it did not load them: model\.layers\.0\.mlp\.gate\.weight: .*answered 400: Get parameter by name failed/,
    )
    // As SGLang's load_weights, the double skipped every name its model lacks and said success.
    expect(doubles[0].loads.at(-1)).toMatchObject({ known: 0, changed: 0, served: 0 })
    expect(doubles[0].loads.at(-1)?.skipped).toHaveLength(45)
    expect(doubles[0].errors).toEqual([
      expect.stringMatching(
        /changed 0 of 0 served tensors \(45 checkpoint tensors skipped as unknown\)/,
      ),
    ])
  })

  it('"required": an engine that cannot read the tensor back fails the load; "off": never asked', async () => {
    const bare = sglangDouble(() => ({ tokens: [5] }))
    const server = await startTestServer(bare.handler)
    closing.push(server)
    const required = sglangWeightSync({ baseUrl: server.url, readBack: "required" })
    expect(await outcome(required.update({ path: await exported(1n), version: 1n }))).toMatch(
      /^WeightsNotLoaded: .*\/get_weights_by_name/,
    )
    server.reset(bare.handler)
    bare.ignoreLoads = true
    const off = sglangWeightSync({ baseUrl: server.url, readBack: "off" })
    expect(await outcome(off.update({ path: await exported(2n), version: 2n }))).toBe("ok")
    expect(readBacks(server)).toBe(0)
    // The version is still confirmed: an engine reporting another fails the load.
    const wrong = sglangDouble(() => ({ tokens: [5] }))
    const other = await startTestServer((r) =>
      r.path === "/get_weight_version"
        ? { status: 200, body: { weight_version: "default" } }
        : wrong.handler(r),
    )
    closing.push(other)
    expect(
      await outcome(
        sglangWeightSync({ baseUrl: other.url, readBack: "off" }).update({
          path: await exported(3n),
          version: 3n,
        }),
      ),
    ).toMatch(
      /^WeightsNotLoaded: .*\/get_weight_version shows it did not load them: it reports "default"/,
    )
  })

  it("reads the pause mode from /get_server_info, else /server_info; a server with neither is loaded without a pause", async () => {
    const d = sglangDouble(() => ({ tokens: [5] }))
    let hide = ["/get_server_info"]
    const server = await startTestServer((r) =>
      hide.includes(r.path) ? { status: 404, body: { detail: "Not Found" } } : d.handler(r),
    )
    closing.push(server)
    const sync = sglangWeightSync({ baseUrl: server.url })
    expect(await outcome(sync.update({ path: await exported(1n), version: 1n }))).toBe("ok")
    expect(d.refits).toEqual(["pause retract", `update ${d.loads[0]?.path} 1`, "continue"])
    expect(server.received.map((r) => r.path).slice(0, 2)).toEqual([
      "/get_server_info",
      "/server_info",
    ])
    hide = ["/get_server_info", "/server_info"]
    expect(await outcome(sync.update({ path: await exported(2n), version: 2n }))).toBe("ok")
    expect(d.refits.slice(3)).toEqual([`update ${d.loads[1]?.path} 2`])
  })
})
