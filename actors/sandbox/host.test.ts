import { randomUUID } from "node:crypto"
import { fromBinary } from "@bufbuild/protobuf"
import { Effect, Layer, Schedule, type Scope, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { ErrorCode, SandboxHostHeartbeatSchema } from "../../proto/index.ts"
import { Bus, type BusShape, MemoryBusLive, subjectsFor } from "../../services/bus/index.ts"
import { Metrics, makeMetrics } from "../../services/metrics/index.ts"
import { SandboxRequestFailed, sandboxClient } from "./client.ts"
import { sandboxSpec } from "./driver.ts"
import { SandboxNotFound } from "./errors.ts"
import { testHostOptions } from "./host.fixture.ts"
import { runSandboxHost } from "./host.ts"
import { LocalDriverLive } from "./local/index.ts"

const subjects = subjectsFor("hosttest")
const template = sandboxSpec({ image: "local", workdir: "/sbx", ttlMs: 60_000 })
/** A spec as a client sends it over the bus. */
const spec = (workdir = "/sbx") => ({ image: "local", workdir })

/** A sandbox host on the local driver and the in-memory bus, and a client beside it. */
const withHost = <A, E>(warm: number, f: (bus: BusShape) => Effect.Effect<A, E, Scope.Scope>) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const bus = yield* Bus
        yield* Effect.forkScoped(
          runSandboxHost(
            testHostOptions(subjects, `host-test-${randomUUID().slice(0, 6)}`, {
              pool: {
                warm: warm > 0 ? [{ spec: template, size: warm }] : [],
                maxStarting: 2,
                createPerSecond: 50,
                createBurst: 4,
              },
            }),
          ).pipe(Effect.provide(LocalDriverLive())),
        )
        return yield* f(bus)
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

const createWhenUp = (
  bus: BusShape,
  init: Parameters<ReturnType<typeof sandboxClient>["create"]>[0],
) =>
  sandboxClient(bus, subjects)
    .create(init)
    .pipe(
      // The host subscribes in the background: retry until it answers.
      Effect.retry({
        while: (e) => e._tag === "NoResponders",
        schedule: Schedule.spaced("50 millis"),
        times: 200,
      }),
    )

describe("sandbox host over the bus (local driver)", () => {
  it("creates, runs commands with persistent state, moves files, and destroys", async () => {
    const got = await withHost(0, (bus) =>
      Effect.gen(function* () {
        const client = sandboxClient(bus, subjects)
        const { sandboxId } = yield* createWhenUp(bus, spec())
        yield* client.exec(sandboxId, "cd /tmp && export GREETING=hi")
        const state = yield* client.exec(sandboxId, 'printf "%s %s" "$PWD" "$GREETING"')
        const big = yield* client.exec(sandboxId, "head -c 100000 /dev/zero | tr '\\0' x", {
          maxOutputBytes: 1000,
        })
        const slow = yield* client.exec(sandboxId, "sleep 30", { timeoutMs: 300 })
        const after = yield* client.exec(sandboxId, "echo still here")
        const existed = yield* client.destroy(sandboxId)
        const gone = yield* Effect.flip(client.exec(sandboxId, "true"))
        return { state, big, slow, after, existed, gone }
      }),
    )
    expect(new TextDecoder().decode(got.state.output)).toBe("/tmp hi")
    expect(got.big.truncated).toBe(true)
    expect(got.big.outputTotalBytes).toBe(100_000n)
    expect(got.big.output.byteLength).toBeLessThan(1200)
    expect(got.slow.timedOut).toBe(true)
    expect(got.slow.exitCode).toBe(-1)
    expect(new TextDecoder().decode(got.after.output)).toBe("still here\n")
    expect(got.existed).toBe(true)
    expect(got.gone).toBeInstanceOf(SandboxNotFound)
  })

  it("answers a retried create with the same sandbox (request_id)", async () => {
    const ids = await withHost(0, (bus) =>
      Effect.gen(function* () {
        const client = sandboxClient(bus, subjects)
        const a = yield* createWhenUp(bus, spec())
        // Concurrent retries of one request while it is still being created: one sandbox.
        const [first, again] = yield* Effect.all(
          [client.create(spec(), "req-1"), client.create(spec(), "req-1")],
          { concurrency: 2 },
        )
        yield* client.destroy(a.sandboxId)
        yield* client.destroy(first.sandboxId)
        return [a.sandboxId, first.sandboxId, again.sandboxId]
      }),
    )
    expect(ids[1]).toBe(ids[2])
    expect(ids[0]).not.toBe(ids[1])
  })

  it("rejects bad input with typed errors naming the problem", async () => {
    const got = await withHost(0, (bus) =>
      Effect.gen(function* () {
        const client = sandboxClient(bus, subjects)
        const badSpec = yield* Effect.flip(createWhenUp(bus, { ...spec(), limits: { cpus: -1 } }))
        const badDir = yield* Effect.flip(client.create({ ...spec("relative/dir") }))
        const { sandboxId } = yield* client.create(spec())
        const nul = yield* Effect.flip(client.exec(sandboxId, "echo a\0b"))
        // A separate process (argv) is the docker driver's; the local one says it has none.
        const argv = yield* Effect.flip(client.execArgv(sandboxId, ["/bin/true"]))
        yield* client.destroy(sandboxId)
        return { badSpec, badDir, nul, argv }
      }),
    )
    for (const e of [got.badSpec, got.badDir, got.nul, got.argv])
      expect(e).toBeInstanceOf(SandboxRequestFailed)
    const detail = (e: unknown) => (e as SandboxRequestFailed).detail
    expect(detail(got.badSpec).code).toBe(ErrorCode.INVALID_ARGUMENT)
    expect(detail(got.badSpec).fieldPath).toBe("spec.limits.cpus")
    expect(detail(got.badDir).fieldPath).toBe("spec.workdir")
    expect(detail(got.nul).message).toContain("NUL")
    expect(detail(got.argv).message).toContain(
      "the local driver runs commands only in the sandbox's shell",
    )
    expect(detail(got.argv).retryable).toBe(false)
  })

  it("hands out warm sandboxes and reports them in heartbeats", async () => {
    const got = await withHost(2, (bus) =>
      Effect.gen(function* () {
        const beats = yield* bus.subscribe(`${subjects.prefix}.sandbox.heartbeat`)
        const full = yield* Stream.runHead(
          beats.pipe(
            Stream.map((m) => fromBinary(SandboxHostHeartbeatSchema, m.data)),
            Stream.filter((h) => h.warm >= 2),
          ),
        ).pipe(Effect.timeout("20 seconds"))
        const client = sandboxClient(bus, subjects)
        const lease = yield* client.create(spec())
        const echo = yield* client.exec(lease.sandboxId, "echo warm")
        yield* client.destroy(lease.sandboxId)
        return { full, lease, echo }
      }),
    )
    expect(got.full._tag).toBe("Some")
    expect(got.lease.durationMs).toBeLessThan(50)
    expect(new TextDecoder().decode(got.echo.output)).toBe("warm\n")
  })
})
