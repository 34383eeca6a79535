/**
 * The guard on a real engine: a docker sandbox that cannot be guarded is unverifiable with the
 * reason, never scored with its own programs; files the agent put under the Python site
 * directories never reach the tests, and the outcome names them and the tests they broke.
 */
import { randomUUID } from "node:crypto"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connectDocker, DockerDriverLive } from "../sandbox/docker/index.ts"
import { SandboxDriver, sandboxSpec } from "../sandbox/driver.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "../sandbox/image/testing.ts"
import { TOOLCHAIN_TIMEOUT } from "../sandbox/index.ts"
import type { VerifierOutcome } from "./outcome.ts"
import { driverSandbox, VerifierSandbox, type VerifierSandboxShape } from "./port.ts"
import { verifyEpisode } from "./verify.ts"

const SITE = "/usr/local/lib/python3.11/dist-packages"

const hostDir = mkdtempSync(join(tmpdir(), "t1-guard-docker-"))
const testsDir = (name: string, body: string) => {
  const dir = join(hostDir, name)
  mkdirSync(dir)
  writeFileSync(join(dir, "test_work.py"), body)
  return dir
}

const WORK = `from pathlib import Path

def test_1(): assert Path("/app/out1.txt").read_text().strip() == "1"
def test_2(): assert Path("/app/out2.txt").read_text().strip() == "2"
def test_3(): assert Path("/app/out3.txt").read_text().strip() == "3"
`
/** A task whose instruction asked the agent to install a library the tests import. */
const IMPORTS_AGENT_LIBRARY = `import agentlib

def test_answer(): assert agentlib.answer() == 42
def test_plain(): assert 1 + 1 == 2
`

const task = (dir: string, expectedTests: number) => ({
  id: "guard-docker",
  environment: { allowInternet: false, workdir: "/app" },
  verifier: {
    testsDir: dir,
    testDir: "/tests",
    kind: "pytest" as const,
    script: undefined,
    scriptPath: undefined,
    parser: undefined,
    timeoutSec: 60,
    expectedTests,
  },
})

const docker = connectDocker()
const runtime = ManagedRuntime.make(
  DockerDriverLive({ ownerId: `guard-docker-${randomUUID().slice(0, 6)}`, docker }),
)

beforeAll(async () => {
  await ensureTestBaseImage()
}, BASE_IMAGE_TIMEOUT_MS)

afterAll(async () => {
  await runtime.dispose()
  rmSync(hostDir, { recursive: true, force: true })
})

const quick = { timeoutMs: 30_000, maxOutputBytes: 64 * 1024 }
/** The honest agent wrote 2 of 3 answers; then `work`; then t1 verifies through `wrap`. */
const verifyAfter = (
  work: string,
  t: ReturnType<typeof task>,
  wrap: (s: VerifierSandboxShape) => VerifierSandboxShape = (s) => s,
): Promise<VerifierOutcome> =>
  runtime.runPromise(
    Effect.gen(function* () {
      const driver = yield* SandboxDriver
      const info = yield* driver.create(sandboxSpec({ cpus: 1, memoryMb: 512, ttlMs: 180_000 }))
      return yield* Effect.gen(function* () {
        for (const step of ["echo 1 > /app/out1.txt; echo 2 > /app/out2.txt", work]) {
          const r = yield* driver.exec(info.id, step, quick)
          if (r.exitCode !== 0)
            return yield* Effect.die(new Error(new TextDecoder().decode(r.output)))
        }
        return yield* verifyEpisode(t).pipe(
          Effect.provideService(VerifierSandbox, wrap(driverSandbox(driver, info.id))),
        )
      }).pipe(Effect.ensuring(Effect.ignore(driver.destroy(info.id))))
    }),
  )

const expectUnverifiable = (o: VerifierOutcome, reason: RegExp) => {
  expect(o.kind).toBe("unverifiable")
  expect([o.passed, o.reward, o.resolved, o.tests.length]).toEqual([0, 0, false, 0])
  expect(o.notes.join("\n")).toMatch(reason)
  expect(o.notes.join("\n")).not.toMatch(/could have replaced/)
}

describe("the guard fails closed on a real engine", () => {
  it("an honest agent is scored through the seal and the toolchain", async () => {
    const o = await verifyAfter("true", task(testsDir("honest", WORK), 3))
    expect([o.kind, o.passed, o.total, o.guarded]).toEqual(["scored", 2, 3, true])
  }, 120_000)

  it("a removed workdir: unverifiable with the reason, not the sandbox's shell", async () => {
    // Before the seal, docker exec started in the workdir: removing it made the exec fail and
    // the verifier fall back to the sandbox's own programs.
    const o = await verifyAfter("cd / && rm -rf /app", task(testsDir("workdir", WORK), 3))
    expectUnverifiable(o, /workdir \/app is gone/)
  }, 120_000)

  it("a missing toolchain program: the engine's exit 127 is unverifiable, not a fallback", async () => {
    const o = await verifyAfter("true", task(testsDir("missing", WORK), 3), (s) => ({
      ...s,
      execArgv: (argv, options) =>
        s.execArgv?.(
          argv.map((a) => (a === TOOLCHAIN_TIMEOUT ? "/.t1v/bin/no-such-timeout" : a)),
          options,
        ) ?? Effect.die("no execArgv"),
    }))
    expectUnverifiable(o, /toolchain does not run in this sandbox \(exit 12[67]\)/)
  }, 120_000)

  it("a broken toolchain: its Python fails to run, unverifiable", async () => {
    // Its interpreter stands in for one that exits at once (the toolchain's own `false`).
    const o = await verifyAfter("true", task(testsDir("broken", WORK), 3), (s) => ({
      ...s,
      execArgv: (argv, options) =>
        s.execArgv?.(
          argv.map((a) => a.replaceAll("'/.t1v/bin/python3'", "'/.t1v/bin/false'")),
          options,
        ) ?? Effect.die("no execArgv"),
    }))
    expectUnverifiable(o, /toolchain does not run in this sandbox \(exit 1\): no output/)
  }, 120_000)

  it("a seal the driver refuses (the reaper's successor failing): unverifiable", async () => {
    const o = await verifyAfter("true", task(testsDir("seal", WORK), 3), (s) => ({
      ...s,
      seal: (options) =>
        s.seal?.({ ...options, pristinePaths: ["relative/site-packages"] }) ??
        Effect.die("no seal"),
    }))
    expectUnverifiable(o, /could not be sealed.*pristinePaths/)
  }, 120_000)
})

describe("tests that import what the agent installed (bad input)", () => {
  it("the outcome names the files taken from the image and the tests that failed for them", async () => {
    const o = await verifyAfter(
      `mkdir -p ${SITE} && printf 'def answer():\\n    return 42\\n' > ${SITE}/agentlib.py`,
      task(testsDir("agentlib", IMPORTS_AGENT_LIBRARY), 2),
    )
    expect(o.kind).toBe("scored")
    const notes = o.notes.join("\n")
    expect(notes).toContain(`the agent had added 1 file under the Python site directories`)
    expect(notes).toContain(`${SITE}/agentlib.py`)
    expect(notes).toMatch(/test_work\.py(::\w+)? failed importing agentlib/)
    expect(o.passed).toBe(0)
  }, 120_000)
})
