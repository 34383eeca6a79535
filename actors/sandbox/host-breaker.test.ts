import { Effect, Layer, Schedule } from "effect"
import { describe, expect, it } from "vitest"
import { Bus, MemoryBusLive, subjectsFor } from "../../services/bus/index.ts"
import { Metrics, type MetricsShape, makeMetrics } from "../../services/metrics/index.ts"
import { sandboxClient } from "./client.ts"
import { SandboxDriver } from "./driver.ts"
import { SandboxInfraError } from "./errors.ts"
import { testHostOptions } from "./host.fixture.ts"
import { runSandboxHost, type SandboxHostOptions } from "./host.ts"
import { LocalDriverLive } from "./local/index.ts"

const subjects = subjectsFor("breakertest")
const COOLDOWN_MS = 5000
const hostOptions = (owner: string): SandboxHostOptions =>
  testHostOptions(subjects, owner, {
    pool: { warm: [], maxStarting: 2, createPerSecond: 1000, createBurst: 100 },
    heartbeatMs: 60_000,
    breaker: { failures: 3, windowMs: 10_000, cooldownMs: COOLDOWN_MS },
  })

/** The local driver with `create` replaced: an engine that fails its creates. */
const brokenDriver = (create: () => Effect.Effect<never, SandboxInfraError>) =>
  Layer.effect(
    SandboxDriver,
    Effect.map(SandboxDriver, (driver) => ({ ...driver, create })),
  ).pipe(Layer.provide(LocalDriverLive()))

/** An engine that refuses every create (out of disk, say). */
const BrokenDriver = brokenDriver(() =>
  Effect.fail(new SandboxInfraError({ operation: "create", reason: "no space left on device" })),
)

const gauge = (text: string, name: string, owner: string): number | undefined => {
  const line = text
    .split("\n")
    .find((l) => l.startsWith(`${name}{`) && l.includes(`member="${owner}"`))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1))
}

describe("sandbox host circuit breaker", () => {
  it("a host that fails every create leaves the queue group, the healthy host takes the work, and it probes after the cool-down", async () => {
    const metrics: MetricsShape = makeMetrics({ defaultMetrics: false })
    const outcome = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          yield* Effect.forkScoped(
            runSandboxHost(hostOptions("broken")).pipe(Effect.provide(BrokenDriver)),
          )
          yield* Effect.forkScoped(
            runSandboxHost(hostOptions("healthy")).pipe(Effect.provide(LocalDriverLive())),
          )
          const client = sandboxClient(bus, subjects)
          // A client retries what the host calls retryable (infra), as the sampler does; each
          // create counts its refused attempts.
          let failedAttempts = 0
          const tracked = client.create({ image: "local", workdir: "/sbx" }).pipe(
            Effect.tapError((e) =>
              Effect.sync(() => {
                if (e._tag === "SandboxRequestFailed") failedAttempts++
              }),
            ),
            Effect.retry({
              while: (e) =>
                e._tag === "NoResponders" || (e._tag === "SandboxRequestFailed" && e.retryable),
              schedule: Schedule.spaced("20 millis"),
              times: 200,
            }),
          )
          // Until the breaker opens the queue group splits creates between the hosts.
          const first: unknown[] = []
          while (failedAttempts < 3 && first.length < 50) first.push(yield* tracked)
          const openedAt = Date.now()
          const afterFirst = yield* Effect.promise(() => metrics.registry.metrics())
          const failedBeforeOpen = failedAttempts
          // Open: every create lands on the healthy host, none fails.
          const second = yield* Effect.forEach(Array.from({ length: 6 }), () => tracked)
          const failedWhileOpen = failedAttempts - failedBeforeOpen
          expect(Date.now() - openedAt).toBeLessThan(COOLDOWN_MS)
          // After the cool-down the broken host takes creates again; its first failure re-opens.
          yield* Effect.sleep(COOLDOWN_MS + 200 - (Date.now() - openedAt))
          yield* Effect.forEach(Array.from({ length: 8 }), () => tracked)
          const end = yield* Effect.promise(() => metrics.registry.metrics())
          return { first, second, afterFirst, failedBeforeOpen, failedWhileOpen, end }
        }),
      ).pipe(Effect.provide(Layer.mergeAll(MemoryBusLive(), Layer.succeed(Metrics, metrics)))),
    )
    expect(outcome.second).toHaveLength(6)
    // Three failures open it; a retry already on its way to the host when it left may fail too.
    expect(outcome.failedBeforeOpen).toBeGreaterThanOrEqual(3)
    expect(outcome.failedBeforeOpen).toBeLessThanOrEqual(4)
    expect(outcome.first.length).toBeLessThan(50)
    expect(outcome.failedWhileOpen).toBe(0)
    expect(gauge(outcome.afterFirst, "t1_breaker_state", "broken")).toBe(1)
    expect(gauge(outcome.afterFirst, "t1_breaker_state", "healthy")).toBe(0)
    expect(gauge(outcome.afterFirst, "t1_breaker_opens_total", "broken")).toBe(1)
    expect(gauge(outcome.end, "t1_breaker_opens_total", "broken")).toBe(2)
    expect(gauge(outcome.end, "t1_breaker_opens_total", "healthy")).toBeUndefined()
  }, 30_000)
})

describe("sandbox host circuit breaker, creates already taken", () => {
  it("a create waiting for a start slot when the breaker opens is answered unavailable without reaching the engine", async () => {
    let engineCalls = 0
    const SlowBroken = brokenDriver(() =>
      Effect.andThen(
        Effect.sync(() => {
          engineCalls++
        }),
        Effect.andThen(
          Effect.sleep("100 millis"),
          Effect.fail(new SandboxInfraError({ operation: "create", reason: "engine hung" })),
        ),
      ),
    )
    const options = testHostOptions(subjects, "slow-broken", {
      // One start slot: the host takes two creates at a time, the second waits for the slot.
      pool: { warm: [], maxStarting: 1, createPerSecond: 1000, createBurst: 100 },
      heartbeatMs: 60_000,
      breaker: { failures: 2, windowMs: 10_000, cooldownMs: COOLDOWN_MS },
    })
    const answers = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          yield* Effect.forkScoped(runSandboxHost(options).pipe(Effect.provide(SlowBroken)))
          yield* Effect.sleep("100 millis")
          const client = sandboxClient(bus, subjects)
          return yield* Effect.forEach(
            Array.from({ length: 6 }),
            () =>
              client.create({ image: "local", workdir: "/sbx" }).pipe(
                Effect.map(() => "created"),
                // Creates the host never took (it left the queue group) wait out their timeout.
                Effect.timeoutOrElse({
                  duration: "3 seconds",
                  orElse: () => Effect.succeed("not taken"),
                }),
                Effect.catch((e) =>
                  Effect.succeed(e._tag === "SandboxRequestFailed" ? e.detail.message : e._tag),
                ),
              ),
            { concurrency: "unbounded" },
          )
        }),
      ).pipe(
        Effect.provide(
          Layer.mergeAll(
            MemoryBusLive(),
            Layer.succeed(Metrics, makeMetrics({ defaultMetrics: false })),
          ),
        ),
      ),
    )
    // Two failures open the breaker; the create that then got the slot never reached the engine.
    expect(engineCalls).toBe(2)
    expect(answers.filter((a) => /circuit breaker is open/.test(a)).length).toBeGreaterThanOrEqual(
      1,
    )
    expect(answers).not.toContain("created")
  }, 30_000)
})
