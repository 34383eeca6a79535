import { randomUUID } from "node:crypto"
import { Effect, Layer, Schedule, type Scope } from "effect"
import { describe, expect, it } from "vitest"
import { ErrorCode } from "../../proto/index.ts"
import { Bus, type BusShape, MemoryBusLive, subjectsFor } from "../../services/bus/index.ts"
import { Metrics, makeMetrics } from "../../services/metrics/index.ts"
import { SandboxRequestFailed, sandboxClient } from "./client.ts"
import { SandboxDriver, type SealOptions, type SealReport } from "./driver.ts"
import { SandboxInfraError } from "./errors.ts"
import { testHostOptions } from "./host.fixture.ts"
import { runSandboxHost } from "./host.ts"
import { LocalDriverLive } from "./local/index.ts"

const subjects = subjectsFor("sealtest")
const spec = { image: "local", workdir: "/sbx" }

const REPORT: SealReport = {
  toolchain: true,
  stopped: 3,
  restored: ["/usr/lib/python3/dist-packages/pytest/__init__.py"],
  restoredCount: 1,
  removed: ["/usr/lib/python3/dist-packages/evil.pth", "/usr/lib/python3/dist-packages/x.py"],
  removedCount: 250,
  durationMs: 612,
}

/** The local driver, sealing the way `seal` says (the local driver itself cannot). */
const sealingDriver = (
  seal: (id: string, options: SealOptions) => Effect.Effect<SealReport, SandboxInfraError>,
): Layer.Layer<SandboxDriver, SandboxInfraError> =>
  Layer.effect(
    SandboxDriver,
    Effect.gen(function* () {
      const driver = yield* SandboxDriver
      return { ...driver, seal }
    }),
  ).pipe(Layer.provide(LocalDriverLive()))

const withHost = <A, E>(
  driver: Layer.Layer<SandboxDriver, SandboxInfraError>,
  f: (bus: BusShape) => Effect.Effect<A, E, Scope.Scope>,
) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const bus = yield* Bus
        yield* Effect.forkScoped(
          runSandboxHost(testHostOptions(subjects, `seal-test-${randomUUID().slice(0, 6)}`)).pipe(
            Effect.provide(driver),
          ),
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

const created = (bus: BusShape) =>
  sandboxClient(bus, subjects)
    .create(spec)
    .pipe(
      Effect.retry({
        while: (e) => e._tag === "NoResponders",
        schedule: Schedule.spaced("50 millis"),
        times: 200,
      }),
    )

describe("sandbox host: seal over the bus", () => {
  it("carries the request to the driver and its report back", async () => {
    const asked: Array<[string, SealOptions]> = []
    const got = await withHost(
      sealingDriver((id, options) =>
        Effect.sync(() => {
          asked.push([id, options])
          return REPORT
        }),
      ),
      (bus) =>
        Effect.gen(function* () {
          const { sandboxId } = yield* created(bus)
          const report = yield* sandboxClient(bus, subjects).seal(sandboxId, {
            pristinePaths: [
              "/usr/lib/python3*/dist-packages",
              "/usr/local/lib/python3.1*/site-packages",
            ],
            timeoutMs: 5000,
          })
          return { sandboxId, report }
        }),
    )
    expect(got.report).toEqual(REPORT)
    expect(asked).toEqual([
      [
        got.sandboxId,
        {
          pristinePaths: [
            "/usr/lib/python3*/dist-packages",
            "/usr/local/lib/python3.1*/site-packages",
          ],
          timeoutMs: 5000,
        },
      ],
    ])
  })

  it("answers a driver's failure and a bad path with typed errors, and says when its driver cannot seal", async () => {
    const got = await withHost(
      sealingDriver(() =>
        Effect.fail(new SandboxInfraError({ operation: "seal", reason: "unexpected processes" })),
      ),
      (bus) =>
        Effect.gen(function* () {
          const client = sandboxClient(bus, subjects)
          const { sandboxId } = yield* created(bus)
          const failed = yield* Effect.flip(
            client.seal(sandboxId, { pristinePaths: [], timeoutMs: 5000 }),
          )
          const relative = yield* Effect.flip(
            client.seal(sandboxId, { pristinePaths: ["usr/lib"], timeoutMs: 5000 }),
          )
          return { failed, relative }
        }),
    )
    // The local driver cannot seal: not an error, an answer that says so (the same for every
    // sandbox of that host).
    const unsupported = await withHost(LocalDriverLive(), (bus) =>
      Effect.gen(function* () {
        const { sandboxId } = yield* created(bus)
        return yield* sandboxClient(bus, subjects).seal(sandboxId, {
          pristinePaths: [],
          timeoutMs: 5000,
        })
      }),
    )
    expect(unsupported).toBeUndefined()
    const detail = (e: unknown) => {
      expect(e).toBeInstanceOf(SandboxRequestFailed)
      return (e as SandboxRequestFailed).detail
    }
    expect(detail(got.failed)).toMatchObject({ code: ErrorCode.UNAVAILABLE, retryable: true })
    expect(detail(got.failed).message).toContain("unexpected processes")
    expect(detail(got.relative)).toMatchObject({
      code: ErrorCode.INVALID_ARGUMENT,
      fieldPath: "pristine_paths",
      retryable: false,
    })
  })
})
