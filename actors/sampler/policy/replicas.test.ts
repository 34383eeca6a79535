import { Effect } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { breakerMetrics } from "../../../services/breaker/index.ts"
import { makeMetrics } from "../../../services/metrics/index.ts"
import type { GenerateRequest, PolicyBackendShape } from "./backend.ts"
import { replicatedBackend } from "./replicas.ts"
import { sglangBackend } from "./sglang.ts"
import { type Received, type Reply, startTestServer, type TestServer } from "./test-server.ts"

/** SGLang's answer shape for one generated token (7), or a 503 while `down`. */
const engine =
  (state: { down: boolean }) =>
  (request: Received): Reply => {
    if (state.down) return { status: 503, body: { error: { message: "engine restarting" } } }
    const ids = (request.body as { input_ids: number[] }).input_ids
    return {
      status: 200,
      body: {
        text: "",
        output_ids: [7],
        meta_info: {
          id: "r",
          finish_reason: { type: "length", length: 1 },
          prompt_tokens: ids.length,
          completion_tokens: 1,
          output_token_logprobs: [[-0.5, 7, null]],
        },
      },
    }
  }

const turn = (sessionId: string): GenerateRequest => ({
  sessionId,
  ids: Uint32Array.from([1, 2, 3]),
  sampling: { temperature: 1, topP: 1, maxTokens: 1, stopTokenIds: [] },
})

const servers: TestServer[] = []
const state = [{ down: false }, { down: false }]
beforeAll(async () => {
  for (const s of state) servers.push(await startTestServer(engine(s)))
})
afterAll(() => Promise.all(servers.map((s) => s.close())))
beforeEach(() => {
  state.forEach((s, i) => {
    s.down = false
    servers[i]?.reset(engine(s))
  })
})

const COOLDOWN_MS = 400
const setup = () => {
  const metrics = makeMetrics({ defaultMetrics: false })
  const policy = replicatedBackend(
    servers.map((s) => ({
      name: s.url,
      backend: sglangBackend({ baseUrl: s.url, contextLength: 64 }),
    })),
    {
      breaker: { failures: 2, windowMs: 10_000, cooldownMs: COOLDOWN_MS },
      metrics: breakerMetrics(metrics),
    },
  )
  return { metrics, policy }
}
const run = (policy: PolicyBackendShape, sessionId: string) =>
  Effect.runPromise(Effect.result(policy.generate(turn(sessionId))))
const hits = () => servers.map((s) => s.received.length)
const stateOf = async (metrics: ReturnType<typeof makeMetrics>, i: number) => {
  const text = await metrics.registry.metrics()
  const line = text
    .split("\n")
    .find((l) => l.startsWith("t1_breaker_state{") && l.includes(`member="${servers[i]?.url}"`))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1))
}

describe("replicatedBackend", () => {
  it("spreads new episodes round-robin and keeps an episode on its replica", async () => {
    const { policy } = setup()
    for (const s of ["a", "b", "c", "d"]) expect((await run(policy, s))._tag).toBe("Success")
    expect(hits()).toEqual([2, 2])
    // Episode "a" went to the first replica; its next turns stay there.
    await run(policy, "a")
    await run(policy, "a")
    expect(hits()).toEqual([4, 2])
  })

  it("opens a failing replica's breaker, sends its episodes' retries and new episodes to the healthy one, and probes after the cool-down", async () => {
    const { policy, metrics } = setup()
    ;(state[0] as { down: boolean }).down = true
    const outcomes: string[] = []
    // Four episodes' first turns: two land on the failing replica, which then opens.
    for (const s of ["a", "b", "c", "d"]) outcomes.push((await run(policy, s))._tag)
    expect(outcomes.filter((o) => o === "Failure")).toHaveLength(2)
    expect(await stateOf(metrics, 0)).toBe(1)
    expect(await stateOf(metrics, 1)).toBe(0)
    // The failed episodes retry their turn: the healthy replica answers; so do new episodes.
    const before = hits()
    for (const s of ["a", "c", "e", "f", "g"]) expect((await run(policy, s))._tag).toBe("Success")
    expect(hits()[0]).toBe(before[0])
    expect((hits()[1] ?? 0) - (before[1] ?? 0)).toBe(5)
    // After the cool-down one turn probes the first replica: it is back, so the breaker closes.
    ;(state[0] as { down: boolean }).down = false
    await new Promise((r) => setTimeout(r, COOLDOWN_MS + 50))
    for (const s of ["h", "i", "j", "k"]) expect((await run(policy, s))._tag).toBe("Success")
    expect((hits()[0] ?? 0) - (before[0] ?? 0)).toBeGreaterThanOrEqual(1)
    expect(await stateOf(metrics, 0)).toBe(0)
  })

  it("fails fast and retryably when every replica is out, naming when the first probe is due", async () => {
    const { policy } = setup()
    for (const s of state) s.down = true
    for (const s of ["a", "b", "c", "d"]) await run(policy, s)
    const sent = hits()
    const r = await run(policy, "e")
    expect(hits()).toEqual(sent)
    if (r._tag !== "Failure") throw new Error("expected a failure")
    expect(r.failure.retryable).toBe(true)
    expect(r.failure.message).toMatch(
      /every engine replica is out of service.*first probe is in \d+ ms/,
    )
  })

  it("does not count an answer the engine gave (a 4xx) as an infra failure", async () => {
    const { policy, metrics } = setup()
    servers[0]?.reset(() => ({ status: 400, body: { error: { message: "bad request" } } }))
    for (const s of ["a", "b", "c", "d", "e", "f"]) await run(policy, s)
    expect(await stateOf(metrics, 0)).toBe(0)
    expect(hits()).toEqual([3, 3])
  })

  it("a turn that finds every replica out of rotation (loading) waits for one to rejoin, up to rotationWaitMs", async () => {
    const out = new Set(servers.map((s) => s.url))
    const policy = replicatedBackend(
      servers.map((s) => ({
        name: s.url,
        backend: sglangBackend({ baseUrl: s.url, contextLength: 64 }),
      })),
      { inRotation: (name) => !out.has(name), rotationWaitMs: 2000 },
    )
    const started = Date.now()
    setTimeout(() => out.delete(servers[1]?.url ?? ""), 400)
    const r = await run(policy, "a")
    expect(r._tag).toBe("Success")
    expect(Date.now() - started).toBeGreaterThanOrEqual(350)
    expect(hits()).toEqual([0, 1])

    // The bound: nobody rejoins, the turn fails (retryable) after rotationWaitMs.
    const short = replicatedBackend(
      servers.map((s) => ({
        name: s.url,
        backend: sglangBackend({ baseUrl: s.url, contextLength: 64 }),
      })),
      { inRotation: () => false, rotationWaitMs: 300 },
    )
    const t0 = Date.now()
    const f = await run(short, "b")
    const waited = Date.now() - t0
    if (f._tag !== "Failure") throw new Error("expected a failure")
    expect(f.failure.retryable).toBe(true)
    expect(f.failure.message).toMatch(/no engine replica in rotation after waiting \d+ ms/)
    expect(waited).toBeGreaterThanOrEqual(280)
    expect(waited).toBeLessThan(1500)
  })
})
