import { execFileSync } from "node:child_process"
import { createHash, randomBytes, randomUUID } from "node:crypto"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf"
import { Effect, Layer, Schedule, type Scope } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import {
  ErrorCode,
  type FilesRefSchema,
  TestOutcome,
  type VerifierResult,
  VerifierResultSchema,
  VerifyRequestSchema,
} from "../../proto/index.ts"
import { ERROR_HEADER } from "../../services/actor/index.ts"
import { Bus, type BusShape, MemoryBusLive, subjectsFor } from "../../services/bus/index.ts"
import { Metrics, type MetricsShape, makeMetrics } from "../../services/metrics/index.ts"
import { packDirectory } from "../../services/tar/index.ts"
import { sandboxClient } from "../sandbox/client.ts"
import { sandboxSpec } from "../sandbox/driver.ts"
import { runSandboxHost } from "../sandbox/host.ts"
import { LocalDriverLive } from "../sandbox/local/index.ts"
import { runVerifier } from "./actor.ts"
import { FORGING_HELPER } from "./forging-helper.fixture.ts"

const subjects = subjectsFor("verifiertest")
const scratch = mkdtempSync(join(tmpdir(), "t1-verifier-actor-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const WORK_TESTS = `from pathlib import Path

def check(i):
    assert Path(f"out{i}.txt").read_text().strip() == str(i)

def test_1(): check(1)
def test_2(): check(2)
def test_3(): check(3)
def test_4(): check(4)
def test_5(): check(5)
`

/** Task store layout: <root>/<task set>/<task>/tests. */
const taskRoot = join(scratch, "store")
mkdirSync(join(taskRoot, "fixtures", "five", "tests"), { recursive: true })
writeFileSync(join(taskRoot, "fixtures", "five", "tests", "test_work.py"), WORK_TESTS)
const testsTar = (await packDirectory(join(taskRoot, "fixtures", "five", "tests"))).tar

/** Tests that import the agent's module `helper` from the workdir. */
mkdirSync(join(taskRoot, "fixtures", "helper", "tests"), { recursive: true })
writeFileSync(
  join(taskRoot, "fixtures", "helper", "tests", "test_helper.py"),
  `from helper import answer

def test_answer():
    assert answer() == 42

def test_answer_is_even():
    assert answer() % 2 == 0
`,
)

/** Tests bigger than one bus message (1 MiB): they reach the sandbox in pieces. */
const bigData = randomBytes(3 * 1024 * 1024)
mkdirSync(join(taskRoot, "fixtures", "big", "tests"), { recursive: true })
writeFileSync(join(taskRoot, "fixtures", "big", "tests", "data.bin"), bigData)
writeFileSync(
  join(taskRoot, "fixtures", "big", "tests", "test_big.py"),
  `import hashlib
from pathlib import Path

def test_data_arrived_whole():
    data = (Path(__file__).parent / "data.bin").read_bytes()
    assert hashlib.sha256(data).hexdigest() == "${createHash("sha256").update(bigData).digest("hex")}"
`,
)

// The local driver runs the host's programs: its sandboxes need a Python with pytest on PATH.
const python = execFileSync(
  "python3",
  ["-c", "import os, sys, pytest; print(os.path.dirname(os.path.realpath(sys.executable)))"],
  { encoding: "utf8" },
).trim()
const PATH = `${python}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`

let run = 0
/** Paths outside the workdir are this host's under the local driver: each run gets its own. */
const fresh = () => join(scratch, `run-${++run}`)

/** A sandbox host (local driver) and a verifier on one in-memory bus, and `f` beside them. */
const withActors = <A, E>(
  f: (bus: BusShape) => Effect.Effect<A, E, Scope.Scope>,
  metrics: MetricsShape = makeMetrics({ defaultMetrics: false }),
) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const bus = yield* Bus
        yield* Effect.forkScoped(
          runSandboxHost({
            subjects,
            owner: `verifier-test-${randomUUID().slice(0, 6)}`,
            defaults: {
              image: "local",
              workdir: "/app",
              ttlMs: 60_000,
              execTimeoutMs: 10_000,
              maxOutputBytes: 64 * 1024,
              maxGetBytes: 1 << 20,
            },
            pool: { warm: [], maxStarting: 2, createPerSecond: 50, createBurst: 4 },
            reapIntervalMs: 60_000,
            heartbeatMs: 1000,
            perSandboxConcurrency: 2,
          }).pipe(Effect.provide(LocalDriverLive({ interruptGraceMs: 1000 }))),
        )
        yield* Effect.forkScoped(
          runVerifier({
            subjects,
            taskRoot,
            concurrency: 2,
            verify: { logsDir: join(fresh(), "logs") },
          }),
        )
        return yield* f(bus)
      }),
    ).pipe(Effect.provide(Layer.mergeAll(MemoryBusLive(), Layer.succeed(Metrics, metrics)))),
  )

/** A sandbox where the agent wrote out1..out<n>.txt, then ran `work`. */
const episode = (bus: BusShape, n: number, work = "") =>
  Effect.gen(function* () {
    const client = sandboxClient(bus, subjects)
    const { sandboxId } = yield* client
      .create(sandboxSpec({ image: "local", workdir: "/app", env: { PATH } }))
      .pipe(
        Effect.retry({
          while: (e) => e._tag === "NoResponders",
          schedule: Schedule.spaced("50 millis"),
          times: 200,
        }),
      )
    yield* client.exec(sandboxId, `for i in $(seq 1 ${n}); do echo $i > out$i.txt; done`)
    if (work !== "") yield* client.exec(sandboxId, work)
    return sandboxId
  })

type RequestInit = MessageInitShape<typeof VerifyRequestSchema>

const request = (
  sandboxId: string,
  testFiles: MessageInitShape<typeof FilesRefSchema> | undefined,
  expectedTestCount = 5,
): RequestInit => ({
  jobId: "job-1",
  episodeId: "ep-1",
  sandboxId,
  attempt: 1,
  task: {
    id: "five",
    taskSet: "fixtures",
    workdir: "/app",
    verifierTimeoutSec: 60,
    testDir: join(fresh(), "tests"),
    expectedTestCount,
    ...(testFiles === undefined ? {} : { testFiles }),
  },
})

/** Sends a request as raw bytes and decodes the VerifierResult answer. */
const verify = (bus: BusShape, init: RequestInit) =>
  bus
    .request(subjects.verify, toBinary(VerifyRequestSchema, create(VerifyRequestSchema, init)), {
      timeoutMs: 60_000,
    })
    .pipe(
      Effect.retry({
        while: (e) => e._tag === "NoResponders",
        schedule: Schedule.spaced("50 millis"),
        times: 200,
      }),
      Effect.map((reply) => fromBinary(VerifierResultSchema, reply.data)),
    )

const summary = (r: VerifierResult) => ({
  passed: r.passed,
  total: r.total,
  reward: r.reward,
  resolved: r.resolved,
  infraFailed: r.infraFailed,
})

describe("verifier actor over the bus (sandbox host on the local driver)", () => {
  it("verifies an episode with inline tar tests and answers per-test results", async () => {
    const result = await withActors((bus) =>
      Effect.gen(function* () {
        const sandboxId = yield* episode(bus, 3)
        return yield* verify(bus, request(sandboxId, { source: { case: "tar", value: testsTar } }))
      }),
    )
    expect(summary(result)).toEqual({
      passed: 3,
      total: 5,
      reward: 3,
      resolved: false,
      infraFailed: false,
    })
    expect(result.error).toBeUndefined()
    expect(result.tests.map((t) => [t.name, t.outcome])).toEqual([
      ["test_work.py::test_1", TestOutcome.PASSED],
      ["test_work.py::test_2", TestOutcome.PASSED],
      ["test_work.py::test_3", TestOutcome.PASSED],
      ["test_work.py::test_4", TestOutcome.FAILED],
      ["test_work.py::test_5", TestOutcome.FAILED],
    ])
    expect(result.durationMs).toBeGreaterThan(0)
    expect(new TextDecoder().decode(result.outputTail)).toContain("short test summary info")
  })

  it("answers a forged verification as a score of 0 with its evidence, and counts it by task", async () => {
    const metrics = makeMetrics({ defaultMetrics: false })
    const helper = `echo ${Buffer.from(FORGING_HELPER).toString("base64")} | base64 -d > helper.py`
    const result = await withActors(
      (bus) =>
        Effect.gen(function* () {
          const sandboxId = yield* episode(bus, 0, helper)
          return yield* verify(
            bus,
            request(sandboxId, { source: { case: "dir", value: "helper/tests" } }, 2),
          )
        }),
      metrics,
    )
    expect(summary(result)).toEqual({
      passed: 0,
      total: 2,
      reward: 0,
      resolved: false,
      infraFailed: false,
    })
    expect(result.forged).toBe(true)
    expect(result.forgeryEvidence.join("\n")).toContain("must fail but passed")
    // Tests as pytest reported them, for diagnosis.
    expect(result.tests.map((t) => t.outcome)).toEqual([TestOutcome.PASSED, TestOutcome.PASSED])
    const counted = await metrics.registry.getSingleMetricAsString("t1_verifier_forged_total")
    expect(counted).toContain('t1_verifier_forged_total{task_set="fixtures",task="five"} 1')
    const results = await metrics.registry.getSingleMetricAsString(
      "t1_verifier_verifications_total",
    )
    expect(results).toContain('t1_verifier_verifications_total{result="forged"} 1')
    // The local driver cannot seal: the result and the metric say the verification was unguarded.
    expect(result.unguarded).toBe(true)
    expect(result.notes.join("\n")).toMatch(/^unguarded: .*its driver cannot stop/m)
    const unguarded = await metrics.registry.getSingleMetricAsString("t1_verifier_unguarded_total")
    expect(unguarded).toContain("t1_verifier_unguarded_total 1")
  })

  it("copies tests larger than a bus message in pieces", async () => {
    const result = await withActors((bus) =>
      Effect.gen(function* () {
        const sandboxId = yield* episode(bus, 0)
        return yield* verify(
          bus,
          request(sandboxId, { source: { case: "dir", value: "big/tests" } }, 1),
        )
      }),
    )
    expect(result.error?.message).toBeUndefined()
    expect(summary(result)).toEqual({
      passed: 1,
      total: 1,
      reward: 1,
      resolved: true,
      infraFailed: false,
    })
  })

  it("answers bad requests with errors and keeps serving", async () => {
    const got = await withActors((bus) =>
      Effect.gen(function* () {
        const sandboxId = yield* episode(bus, 5)
        const garbage = yield* bus
          .request(subjects.verify, new Uint8Array([0xff, 0xff, 0xff]), { timeoutMs: 10_000 })
          .pipe(
            Effect.retry({
              while: (e) => e._tag === "NoResponders",
              schedule: Schedule.spaced("50 millis"),
              times: 200,
            }),
          )
        const noFiles = yield* verify(bus, request(sandboxId, undefined))
        const unknownSandbox = yield* verify(
          bus,
          request("local-doesnotexist", { source: { case: "tar", value: testsTar } }),
        )
        const badSandboxId = yield* verify(
          bus,
          request("../etc", { source: { case: "tar", value: testsTar } }),
        )
        const notATar = yield* verify(
          bus,
          request(sandboxId, { source: { case: "tar", value: new Uint8Array([1, 2, 3]) } }),
        )
        const fromStore = yield* verify(
          bus,
          request(sandboxId, { source: { case: "dir", value: "five/tests" } }),
        )
        const escaping = yield* verify(
          bus,
          request(sandboxId, { source: { case: "dir", value: "../../etc" } }),
        )
        const store = yield* bus.objectStore("t1-tests")
        yield* store.put("five.tar", testsTar)
        const fromObject = yield* verify(
          bus,
          request(sandboxId, {
            source: { case: "object", value: { bucket: "t1-tests", name: "five.tar" } },
          }),
        )
        const missingObject = yield* verify(
          bus,
          request(sandboxId, {
            source: { case: "object", value: { bucket: "t1-tests", name: "nope.tar" } },
          }),
        )
        return {
          garbage: garbage.headers[ERROR_HEADER] ?? "",
          noFiles,
          unknownSandbox,
          badSandboxId,
          notATar,
          fromStore,
          escaping,
          fromObject,
          missingObject,
        }
      }),
    )
    expect(got.garbage).toContain("malformed")
    for (const invalid of [got.noFiles, got.badSandboxId, got.notATar, got.escaping]) {
      expect(invalid.infraFailed).toBe(true)
      expect(invalid.error?.code).toBe(ErrorCode.INVALID_ARGUMENT)
      expect(invalid.error?.retryable).toBe(false)
    }
    expect(got.noFiles.error?.fieldPath).toBe("task.test_files")
    expect(got.missingObject.error?.code).toBe(ErrorCode.NOT_FOUND)
    // A sandbox that is not there: the machinery lost it, so the episode is retried, not scored.
    expect(got.unknownSandbox.infraFailed).toBe(true)
    expect(got.unknownSandbox.error?.retryable).toBe(true)
    expect(got.unknownSandbox.reward).toBe(0)
    // After all that, it still verifies.
    for (const ok of [got.fromStore, got.fromObject])
      expect(summary(ok)).toEqual({
        passed: 5,
        total: 5,
        reward: 5,
        resolved: true,
        infraFailed: false,
      })
  })
})
