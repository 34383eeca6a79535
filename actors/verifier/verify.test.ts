import { execFileSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fromBinary } from "@bufbuild/protobuf"
import { Effect, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { TaskSchema, VerifierResultSchema } from "../../proto/index.ts"
import { openArchive, packDirectory } from "../../services/tar/index.ts"
import type { TaskVerifier } from "../../tasks/task.ts"
import { connectDocker, DockerDriverLive } from "../sandbox/docker/index.ts"
import {
  type ExecOptions,
  SandboxDriver,
  type SandboxSpec,
  sandboxSpec,
} from "../sandbox/driver.ts"
import { SandboxDied } from "../sandbox/errors.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "../sandbox/image/testing.ts"
import { killLocalSandboxProcesses, LocalDriverLive } from "../sandbox/local/index.ts"
import { SandboxCallFailed, VerifierInfraError } from "./errors.ts"
import { FORGING_HELPER } from "./forging-helper.fixture.ts"
import { parseJunitXml } from "./junit.ts"
import { truncateUtf8 } from "./outcome.ts"
import {
  driverSandbox,
  driverSandboxLayer,
  VerifierSandbox,
  type VerifierSandboxShape,
} from "./port.ts"
import { parseRewardJson, parseRewardText } from "./reward-files.ts"
import { parsePytestSummary } from "./summary.ts"
import { scalarScore, type VerifiableTask, type VerifyOptions, verifyEpisode } from "./verify.ts"
import { encodeResultWithin, resultFromOutcome, taskFromWire } from "./wire.ts"

// ---------------------------------------------------------------------------------------------
// Fixtures: a task whose 5 tests each check one file the agent should have written.

const WORK_TESTS = `from pathlib import Path

def check(i):
    assert Path(f"out{i}.txt").read_text().strip() == str(i), f"out{i}.txt is wrong"

def test_1(): check(1)
def test_2(): check(2)
def test_3(): check(3)
def test_4(): check(4)
def test_5(): check(5)
`

/** The agent's work: writes out1..out<n>.txt in the workdir. */
const agentWrites = (n: number) => `for i in $(seq 1 ${n}); do echo $i > out$i.txt; done`

/** A pytest hook that turns every failure into a pass: what a cheating agent would plant. */
const FORCE_PASS_CONFTEST = `import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
`

/** Tests of a task whose tests import the agent's module `helper` from the workdir. */
const HELPER_TESTS = `from helper import answer

def test_answer():
    assert answer() == 42

def test_answer_is_even():
    assert answer() % 2 == 0

def test_answer_is_positive():
    assert answer() > 0
`

/** The agent's honest (and wrong) module: 1 of the 3 tests passes. */
const HONEST_HELPER = `def answer():
    return 0
`

/** The agent writes `body` as helper.py in the workdir. */
const writeHelper = (body: string) =>
  `echo ${Buffer.from(body).toString("base64")} | base64 -d > helper.py`

/**
 * A sandbox in which, right after t1's pytest call, `python` edits the JUnit report that call
 * wrote (its path is taken from the call): what code that rewrites pytest's report would leave.
 */
const editingReport =
  (python: string) =>
  (s: VerifierSandboxShape): VerifierSandboxShape => {
    const report = (text: string) => /--junitxml='([^']+)'/.exec(text.replaceAll("'\\''", "'"))?.[1]
    const edit = (path: string) =>
      `python3 -c "$(echo ${Buffer.from(python).toString("base64")} | base64 -d)" '${path}'`
    const execArgv = s.execArgv
    return {
      ...s,
      exec: (command, options) => {
        const path = report(command)
        return path === undefined
          ? s.exec(command, options)
          : s.exec(command, options).pipe(Effect.tap(() => s.exec(edit(path), options)))
      },
      ...(execArgv === undefined
        ? {}
        : {
            execArgv: (argv, options) => {
              const path = report(argv.join(" "))
              return path === undefined
                ? execArgv(argv, options)
                : execArgv(argv, options).pipe(
                    Effect.tap(() => execArgv(["bash", "-c", edit(path)], options)),
                  )
            },
          }),
    }
  }

/** Every failure and error taken out of the report: every test passed. */
const ALL_PASS = `import re, sys
p = sys.argv[1]
x = open(p).read()
x = re.sub(r"<(failure|error)\\b[^>]*?(/>|>.*?</\\1>)", "", x, flags=re.S)
open(p, "w").write(x)
`

/** Every test case not of test_work.py taken out (the canaries among them). */
const ONLY_WORK = `import re, sys
p = sys.argv[1]
x = open(p).read()
x = re.sub(r'<testcase (?![^>]*file="test_work\\.py")[^>]*?(/>|>.*?</testcase>)', "", x, flags=re.S)
open(p, "w").write(x)
`

const hostDirs: string[] = []
afterAll(() => {
  for (const dir of hostDirs) rmSync(dir, { recursive: true, force: true })
})

/** A host directory holding `files` (paths relative to it). */
const testsDir = (files: Readonly<Record<string, string>>): string => {
  const dir = mkdtempSync(join(tmpdir(), "t1-verifier-tests-"))
  hostDirs.push(dir)
  for (const [name, body] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true })
    writeFileSync(join(dir, name), body)
  }
  return dir
}

const quick: ExecOptions = { timeoutMs: 20_000, maxOutputBytes: 64 * 1024 }

// ---------------------------------------------------------------------------------------------
// The same scenarios on each driver.

interface Harness {
  readonly runtime: ManagedRuntime.ManagedRuntime<SandboxDriver, unknown>
  readonly spec: () => SandboxSpec
  /** Where tests go in the sandbox; the local driver shares the host's files outside /app. */
  readonly testDir: () => string
  readonly logsDir: () => string
  readonly workdir: string
  readonly killFromOutside: (id: string) => Promise<void>
  /** The sandbox has its own root filesystem (docker): the agent can plant files at /. */
  readonly ownRoot: boolean
  /** Verified with the read-only toolchain, outside the agent's shell (guard.ts). */
  readonly guarded: boolean
}

const task = (
  h: Harness,
  dir: string,
  verifier: Partial<TaskVerifier> = {},
  allowInternet = false,
): VerifiableTask => ({
  id: "fixture",
  environment: { allowInternet, workdir: h.workdir },
  verifier: {
    testsDir: dir,
    testDir: h.testDir(),
    kind: "pytest",
    script: undefined,
    scriptPath: undefined,
    parser: undefined,
    timeoutSec: 60,
    expectedTests: 5,
    ...verifier,
  },
})

/**
 * Creates a sandbox, runs the agent's `work` in its shell, verifies `t` there (through `wrap`
 * when given: a sandbox that fails on cue) and destroys it.
 */
const verifyAfter = (
  h: Harness,
  work: string,
  t: VerifiableTask,
  options: VerifyOptions & {
    readonly wrap?: (s: VerifierSandboxShape) => VerifierSandboxShape
    readonly before?: (id: string) => Promise<void>
  } = {},
) =>
  h.runtime.runPromise(
    Effect.gen(function* () {
      const driver = yield* SandboxDriver
      const info = yield* driver.create(h.spec())
      return yield* Effect.gen(function* () {
        if (work !== "") {
          const r = yield* driver.exec(info.id, work, quick)
          if (r.exitCode !== 0)
            throw new Error(`agent work failed: ${new TextDecoder().decode(r.output)}`)
        }
        if (options.before !== undefined) {
          const before = options.before
          yield* Effect.promise(() => before(info.id))
        }
        const sandbox = driverSandbox(driver, info.id)
        return yield* Effect.result(
          verifyEpisode(t, { logsDir: h.logsDir(), ...options }).pipe(
            Effect.provideService(
              VerifierSandbox,
              options.wrap === undefined ? sandbox : options.wrap(sandbox),
            ),
          ),
        )
      }).pipe(Effect.ensuring(Effect.ignore(driver.destroy(info.id))))
    }),
  )

const outcomeOf = async (p: ReturnType<typeof verifyAfter>) => {
  const r = await p
  if (r._tag === "Failure") throw new Error(`expected an outcome, got ${r.failure.message}`)
  return r.success
}

const failureOf = async (p: ReturnType<typeof verifyAfter>) => {
  const r = await p
  if (r._tag === "Success") throw new Error(`expected a failure, got ${JSON.stringify(r.success)}`)
  return r.failure
}

const byName = (tests: ReadonlyArray<{ name: string; outcome: string }>) =>
  Object.fromEntries(tests.map((t) => [t.name, t.outcome]))

/** Fails the first exec `when` picks the way a sandbox that died under it does. */
const dyingWhen =
  (when: (command: string) => boolean) =>
  (s: VerifierSandboxShape): VerifierSandboxShape => {
    let dead = false
    const die = Effect.sync(() => {
      dead = true
    }).pipe(
      Effect.andThen(
        Effect.fail(
          new SandboxCallFailed({
            operation: "exec",
            reason: new SandboxDied({ id: "x", reason: "killed" }).message,
            infra: true,
          }),
        ),
      ),
    )
    const execArgv = s.execArgv
    return {
      ...s,
      exec: (command, options) => (dead || when(command) ? die : s.exec(command, options)),
      // The guarded path runs its scripts as argv (guard.ts): the same cue in its arguments.
      ...(execArgv === undefined
        ? {}
        : {
            execArgv: (argv, options) =>
              dead || when(argv.join(" ")) ? die : execArgv(argv, options),
          }),
    }
  }

const scenarios = (h: Harness) => {
  it("scores the agent's work by the tests that pass: 3 of 5 is reward 3, not resolved", async () => {
    const o = await outcomeOf(
      verifyAfter(h, agentWrites(3), task(h, testsDir({ "test_work.py": WORK_TESTS }))),
    )
    expect(o.mode).toBe("pytest")
    expect([o.passed, o.total, o.reward, o.resolved, o.timedOut]).toEqual([3, 5, 3, false, false])
    expect(byName(o.tests)).toEqual({
      "test_work.py::test_1": "passed",
      "test_work.py::test_2": "passed",
      "test_work.py::test_3": "passed",
      "test_work.py::test_4": "failed",
      "test_work.py::test_5": "failed",
    })
    const failed = o.tests.find((t) => t.name === "test_work.py::test_4")
    expect(failed?.message).toContain("out4.txt")
  })

  it("runs its canaries beside the tests, and neither lists nor counts them", async () => {
    const o = await outcomeOf(
      verifyAfter(h, agentWrites(3), task(h, testsDir({ "test_work.py": WORK_TESTS }))),
    )
    expect([o.kind, o.forgery, o.passed, o.total, o.reward]).toEqual(["scored", [], 3, 5, 3])
    expect(o.tests.map((t) => t.name).every((n) => n.startsWith("test_work.py::"))).toBe(true)
    // pytest ran 9: the 5 tests (3 pass), the canary file's 2 and the 2 appended to
    // test_work.py (one of each pair passes, one fails).
    expect(new TextDecoder().decode(o.outputTail)).toMatch(/4 failed, 5 passed/)
  })

  it("is forged, scored 0, when a module the tests import rewrites pytest's reports; honest, it scores", async () => {
    const tests = testsDir({ "test_helper.py": HELPER_TESTS })
    const t = task(h, tests, { expectedTests: 3 })
    const honest = await outcomeOf(verifyAfter(h, writeHelper(HONEST_HELPER), t))
    expect([honest.kind, honest.passed, honest.total, honest.reward, honest.forgery]).toEqual([
      "scored",
      1,
      3,
      1,
      [],
    ])
    const forged = await outcomeOf(verifyAfter(h, writeHelper(FORGING_HELPER), t))
    expect([forged.kind, forged.passed, forged.total, forged.reward, forged.resolved]).toEqual([
      "forged",
      0,
      3,
      0,
      false,
    ])
    // The tests stay listed as pytest reported them (all passed), for diagnosis.
    expect(forged.tests.map((x) => x.outcome)).toEqual(["passed", "passed", "passed"])
    expect(forged.forgery.join("\n")).toMatch(
      /^canary test_\w+\.py::test_\w+ must fail but passed in pytest's report report\.xml$/m,
    )
    const wire = resultFromOutcome(forged)
    expect([wire.forged, wire.reward, wire.infraFailed, wire.forgeryEvidence]).toEqual([
      true,
      0,
      false,
      forged.forgery,
    ])
  }, 120_000)

  it("is forged when the report was rewritten so that every test passes", async () => {
    const o = await outcomeOf(
      verifyAfter(h, agentWrites(3), task(h, testsDir({ "test_work.py": WORK_TESTS })), {
        wrap: editingReport(ALL_PASS),
      }),
    )
    expect([o.kind, o.passed, o.reward, o.resolved]).toEqual(["forged", 0, 0, false])
    expect(o.tests.filter((t) => t.outcome === "passed")).toHaveLength(5)
    expect(o.forgery.join("\n")).toContain("must fail but passed")
  })

  it("is forged when the canaries are missing from a report that has results", async () => {
    const o = await outcomeOf(
      verifyAfter(h, agentWrites(5), task(h, testsDir({ "test_work.py": WORK_TESTS })), {
        wrap: editingReport(ONLY_WORK),
      }),
    )
    expect([o.kind, o.passed, o.total, o.reward, o.resolved]).toEqual(["forged", 0, 5, 0, false])
    expect(o.forgery.join("\n")).toMatch(/must pass but is missing/)
    expect(o.forgery.join("\n")).toMatch(/must fail but is missing/)
  })

  it("is forged when a test file changes during the run, naming it", async () => {
    // test_a.py's import rewrites test_b.py before pytest collects it: test_b then passes.
    const tests = testsDir({
      "test_a.py": `from pathlib import Path
Path(__file__).with_name("test_b.py").write_text("def test_b():\\n    pass\\n")

def test_a():
    pass
`,
      "test_b.py": "def test_b():\n    assert False\n",
    })
    const o = await outcomeOf(verifyAfter(h, "", task(h, tests, { expectedTests: 2 })))
    expect(byName(o.tests)).toEqual({
      "test_a.py::test_a": "passed",
      "test_b.py::test_b": "passed",
    })
    expect([o.kind, o.passed, o.reward, o.resolved]).toEqual(["forged", 0, 0, false])
    expect(o.forgery).toContain(
      "test files changed during the run: test_b.py (sha256 differs from the upload)",
    )
    // The rewrite also dropped the canaries appended to test_b.py.
    expect(o.forgery.join("\n")).toMatch(/canary test_b\.py::test_\w+ must fail but is missing/)
  })

  it("is not forged when pytest died before it reported anything", async () => {
    const dying = `import os
def test_1(): pass
def test_2(): os._exit(3)
def test_3(): pass
`
    const o = await outcomeOf(
      verifyAfter(h, "", task(h, testsDir({ "test_die.py": dying }), { expectedTests: 3 })),
    )
    expect([o.kind, o.forgery, o.passed, o.total]).toEqual(["scored", [], 0, 3])
    expect(o.tests.map((t) => t.name).sort()).toEqual([
      "test_die.py::test_1",
      "test_die.py::test_2",
      "test_die.py::test_3",
    ])
  })

  it("runs every test despite -x in the task's addopts (the must-fail canary does not stop it)", async () => {
    const o = await outcomeOf(
      verifyAfter(
        h,
        agentWrites(1),
        task(
          h,
          testsDir({
            "test_work.py": WORK_TESTS,
            "pytest.ini": "[pytest]\naddopts = -x --maxfail=1\n",
          }),
        ),
      ),
    )
    expect([o.kind, o.passed, o.total]).toEqual(["scored", 1, 5])
    expect(Object.values(byName(o.tests))).toEqual([
      "passed",
      "failed",
      "failed",
      "failed",
      "failed",
    ])
  })

  it("names its canary file as the task's python_files names test files", async () => {
    const ini = "[pytest]\npython_files = check_*.py\n"
    const o = await outcomeOf(
      verifyAfter(
        h,
        agentWrites(3),
        task(h, testsDir({ "check_work.py": WORK_TESTS, "pytest.ini": ini })),
      ),
    )
    expect(o.forgery).toEqual([])
    expect([o.kind, o.passed, o.total]).toEqual(["scored", 3, 5])
    expect(new TextDecoder().decode(o.outputTail)).toMatch(/4 failed, 5 passed/)
  })

  it("resolves when every test passes", async () => {
    const o = await outcomeOf(
      verifyAfter(h, agentWrites(5), task(h, testsDir({ "test_work.py": WORK_TESTS }))),
    )
    expect([o.passed, o.total, o.reward, o.resolved]).toEqual([5, 5, 5, true])
  })

  it("ignores results, reports and test files the agent placed beforehand", async () => {
    const testDir = h.testDir()
    const logsDir = h.logsDir()
    const fakeReport = `<testsuites><testsuite>${Array.from({ length: 9 }, (_, i) => `<testcase classname="t" name="fake${i}" file="t.py"/>`).join("")}</testsuite></testsuites>`
    const plant = [
      agentWrites(3),
      `mkdir -p ${testDir} ${logsDir} /tmp/t1-verify-0000000000000000`,
      `printf '%s' '${FORCE_PASS_CONFTEST}' > ${testDir}/conftest.py`,
      `cp ${testDir}/conftest.py ./conftest.py`,
      // pytest would load a /conftest.py above the tests unless told where conftests stop.
      h.ownRoot ? `cp ${testDir}/conftest.py /conftest.py` : "true",
      `printf '[pytest]\\naddopts = -p no:junitxml\\n' > ./pytest.ini`,
      `printf 'def test_fake():\\n    pass\\n' > ${testDir}/test_fake.py`,
      `echo 100 > ${logsDir}/reward.txt`,
      `echo '${fakeReport}' > /tmp/t1-verify-0000000000000000/report.xml`,
      `cp /tmp/t1-verify-0000000000000000/report.xml /tmp/report.xml`,
    ].join(" && ")
    const o = await outcomeOf(
      verifyAfter(h, plant, task(h, testsDir({ "test_work.py": WORK_TESTS }))),
    )
    expect([o.passed, o.total, o.reward, o.resolved]).toEqual([3, 5, 3, false])
    expect(o.tests.map((t) => t.name)).not.toContain("test_fake.py::test_fake")

    // A script task: the reward file is read only from the freshly made logs directory.
    const script = testsDir({ "test.sh": "exit 1\n" })
    const s = await outcomeOf(
      verifyAfter(h, plant, task(h, script, { kind: "script", script: "test.sh" })),
    )
    expect(s.mode).toBe("exit-code")
    expect([s.passed, s.reward]).toEqual([0, 0])
  })

  it("stops a hanging verifier at its timeout and counts the tests that finished", async () => {
    const hang = `import time
def test_a(): pass
def test_b(): pass
def test_c_hangs(): time.sleep(1000)
def test_d(): pass
`
    const started = Date.now()
    const o = await outcomeOf(
      verifyAfter(
        h,
        "",
        task(h, testsDir({ "test_hang.py": hang }), { timeoutSec: 3, expectedTests: 4 }),
      ),
    )
    expect(Date.now() - started).toBeLessThan(25_000)
    expect(o.timedOut).toBe(true)
    // Cut short, the canaries may never have run: that is no forgery.
    expect([o.kind, o.forgery]).toEqual(["scored", []])
    expect([o.passed, o.total, o.reward, o.resolved]).toEqual([2, 4, 2, false])
    expect(o.notes.join("\n")).toContain("timeout of 3 s")
  })

  it("is an infra error, not reward 0, when the sandbox is gone or dies", async () => {
    const t = task(h, testsDir({ "test_work.py": WORK_TESTS }))
    const destroyed = await failureOf(
      h.runtime.runPromise(
        Effect.gen(function* () {
          const driver = yield* SandboxDriver
          const info = yield* driver.create(h.spec())
          yield* driver.destroy(info.id)
          return yield* Effect.result(
            verifyEpisode(t, { logsDir: h.logsDir() }).pipe(
              Effect.provide(driverSandboxLayer(driver, info.id)),
            ),
          )
        }),
      ),
    )
    expect(destroyed).toBeInstanceOf(VerifierInfraError)
    expect(destroyed._tag === "VerifierInfraError" && destroyed.retryable).toBe(true)

    const killed = await failureOf(verifyAfter(h, agentWrites(3), t, { before: h.killFromOutside }))
    expect(killed._tag).toBe("VerifierInfraError")
    expect(killed.message).toContain("died")

    // Dies after the tests ran, while their report is read back.
    const readingReport = (command: string) =>
      command.includes("report.xml") && command.includes("wc -c")
    const lateDeath = await failureOf(
      verifyAfter(h, agentWrites(3), t, { wrap: dyingWhen(readingReport) }),
    )
    expect(lateDeath).toBeInstanceOf(VerifierInfraError)
    expect(lateDeath._tag === "VerifierInfraError" && lateDeath.stage).toContain("report.xml")
  })

  it("still reads the report when a test deletes the test directory, and calls it forged", async () => {
    const deleting = `import shutil
from pathlib import Path
def test_1(): pass
def test_2_deletes_the_tests(): shutil.rmtree(Path(__file__).parent)
def test_3(): pass
`
    const o = await outcomeOf(
      verifyAfter(h, "", task(h, testsDir({ "test_del.py": deleting }), { expectedTests: 3 })),
    )
    // The report is read, but files that vanished during the run are what a forger does to
    // tests it cannot pass: the tripwire cannot tell who deleted them.
    expect(byName(o.tests)).toEqual({
      "test_del.py::test_1": "passed",
      "test_del.py::test_2_deletes_the_tests": "passed",
      "test_del.py::test_3": "passed",
    })
    expect([o.kind, o.passed, o.total, o.reward, o.resolved, o.mode]).toEqual([
      "forged",
      0,
      3,
      0,
      false,
      "pytest",
    ])
    expect(o.forgery.join("\n")).toMatch(/test files missing after the run: .*test_del\.py/)
  })

  it("scores huge test output by the report; output and messages stay capped", async () => {
    const loud = `import sys
def test_loud(): sys.stdout.write("x" * 5_000_000)
def test_fails_loudly():
    print("y" * 3_000_000)
    raise AssertionError("z" * 100_000)
`
    const o = await outcomeOf(
      verifyAfter(h, "", task(h, testsDir({ "test_loud.py": loud }), { expectedTests: 2 })),
    )
    expect([o.passed, o.total, o.mode]).toEqual([1, 2, "pytest"])
    expect(o.outputTail.byteLength).toBeLessThanOrEqual(64 * 1024)
    for (const t of o.tests) expect(Buffer.byteLength(t.message)).toBeLessThanOrEqual(4096)
  })

  it("falls back to the -rA summary when the report is over the size limit (unguarded only)", async () => {
    const o = await outcomeOf(
      verifyAfter(h, agentWrites(3), task(h, testsDir({ "test_work.py": WORK_TESTS })), {
        maxReportBytes: 100,
      }),
    )
    expect(o.notes.join("\n")).toContain("over the limit")
    // Output is what code inside pytest can print: a guarded verification does not score it.
    if (h.guarded) {
      expect([o.kind, o.mode, o.reward]).toEqual(["unverifiable", "none", 0])
      return
    }
    expect(o.mode).toBe("pytest-summary")
    expect([o.passed, o.total]).toEqual([3, 5])
    expect(o.notes.join("\n")).toContain("over the limit")
  })

  it("runs the other files when one fails to import, counting it as an error", async () => {
    const o = await outcomeOf(
      verifyAfter(
        h,
        agentWrites(3),
        task(h, testsDir({ "test_work.py": WORK_TESTS, "test_broken.py": "import nope\n" })),
      ),
    )
    expect(byName(o.tests)["test_broken.py"]).toBe("error")
    expect([o.passed, o.total]).toEqual([3, 6])
  })

  it("reads a script verifier's reward.txt", async () => {
    const logs = h.logsDir()
    const dir = testsDir({ "test.sh": `#!/bin/bash\necho 3 > ${logs}/reward.txt\n` })
    const o = await outcomeOf(
      verifyAfter(h, "", task(h, dir, { kind: "script", script: "test.sh" }), { logsDir: logs }),
    )
    expect(o.mode).toBe("reward-file")
    expect([o.reward, o.passed, o.total, o.resolved]).toEqual([3, 3, 5, false])
  })

  it("parses the pytest -rA summary a script prints (TB1's parser), over its scalar reward", async () => {
    const logs = h.logsDir()
    const script = `#!/bin/bash
python3 -m pytest "$TEST_DIR/test_work.py" -rA -p no:cacheprovider
if [ $? -eq 0 ]; then echo 1 > ${logs}/reward.txt; else echo 0 > ${logs}/reward.txt; fi
`
    const dir = testsDir({ "test_work.py": WORK_TESTS, "run-tests.sh": script })
    // The agent's shell exports a python3 that prints an all-pass summary, and aliases bash.
    const forge = [
      agentWrites(3),
      `python3() { printf '%s\\n' '=== short test summary info ===' 'PASSED x.py::test_1'; }`,
      "export -f python3",
      "shopt -s expand_aliases; alias env=true; alias bash=true",
    ].join("; ")
    const o = await outcomeOf(
      verifyAfter(h, forge, task(h, dir, { kind: "script", script: "run-tests.sh" }), {
        logsDir: logs,
      }),
    )
    expect(o.mode).toBe("pytest-summary")
    expect([o.passed, o.total, o.reward]).toEqual([3, 5, 3])
    expect(o.notes.join("\n")).toContain("reward.txt says 0")
  })

  it("runs a script that would fetch pytest over the network as pytest, offline", async () => {
    // The script names /tests as TB2's do; the local driver's tests live elsewhere.
    const testDir = h.testDir()
    const script = TB2_TEST_SH.replaceAll("/tests/", `${testDir}/`)
    const dir = testsDir({ "test_outputs.py": WORK_TESTS, "test.sh": script })
    const o = await outcomeOf(
      verifyAfter(h, agentWrites(4), task(h, dir, { kind: "script", script: "test.sh", testDir })),
    )
    expect([o.path, o.mode]).toEqual(["rewritten-script", "pytest"])
    expect([o.kind, o.passed, o.total]).toEqual(["scored", 4, 5])
    expect(o.pathReason).toContain("over the network")
  })

  it("catches a rewritten script's pytest call forged by a module its tests import", async () => {
    const testDir = h.testDir()
    const script = TB2_TEST_SH.replaceAll("/tests/", `${testDir}/`)
    const dir = testsDir({ "test_outputs.py": HELPER_TESTS, "test.sh": script })
    const t = task(h, dir, { kind: "script", script: "test.sh", testDir, expectedTests: 3 })
    const honest = await outcomeOf(verifyAfter(h, writeHelper(HONEST_HELPER), t))
    expect([honest.path, honest.kind, honest.passed, honest.total]).toEqual([
      "rewritten-script",
      "scored",
      1,
      3,
    ])
    const forged = await outcomeOf(verifyAfter(h, writeHelper(FORGING_HELPER), t))
    expect([forged.path, forged.kind, forged.passed, forged.reward]).toEqual([
      "rewritten-script",
      "forged",
      0,
      0,
    ])
    expect(forged.forgery.join("\n")).toContain(
      "must fail but passed in pytest's report report-0.xml",
    )
  }, 120_000)

  it("scores a TB1 script that stops before its tests 0 of the tests pytest collects, not 0/1", async () => {
    const script = `#!/bin/bash
cd /nonexistent-t1-dir || exit 2
python3 -m pytest "$TEST_DIR/test_work.py" -rA
`
    const dir = testsDir({ "test_work.py": WORK_TESTS, "run-tests.sh": script })
    const o = await outcomeOf(
      verifyAfter(h, agentWrites(3), task(h, dir, { kind: "script", script: "run-tests.sh" })),
    )
    expect([o.path, o.mode, o.passed, o.total, o.resolved]).toEqual([
      "script",
      "exit-code",
      0,
      5,
      false,
    ])
    expect(o.pathReason).toContain("installs nothing over the network")
    expect(o.tests.map((t) => t.name).sort()).toEqual(
      [1, 2, 3, 4, 5].map((i) => `test_work.py::test_${i}`),
    )
    expect(o.tests[0]?.message).toContain("did not run")
  })

  it("scores a script with no report by its exit status", async () => {
    const dir = testsDir({ "check.sh": "test -f out1.txt\n" })
    const t = task(h, dir, { kind: "script", script: "check.sh", expectedTests: 0 })
    const yes = await outcomeOf(verifyAfter(h, agentWrites(1), t))
    const no = await outcomeOf(verifyAfter(h, "", t))
    expect([yes.mode, yes.passed, yes.total, yes.resolved]).toEqual(["exit-code", 1, 1, true])
    expect(yes.notes.join("\n")).toContain("ran as written: no canary tests")
    expect([no.passed, no.total, no.resolved]).toEqual([0, 1, false])
  })
}

// ---------------------------------------------------------------------------------------------

/** The directory of a host Python that has pytest (the local driver runs the host's programs). */
const hostPythonWithPytest = (): string => {
  try {
    return execFileSync(
      "python3",
      ["-c", "import os, sys, pytest; print(os.path.dirname(os.path.realpath(sys.executable)))"],
      { encoding: "utf8" },
    ).trim()
  } catch {
    throw new Error(
      "the local-driver verifier tests need python3 with pytest on this host (apt-get install python3-pytest)",
    )
  }
}

describe("verifyEpisode on the local driver", () => {
  const root = join(tmpdir(), "t1-verifier-sandboxes")
  const scratch = mkdtempSync(join(tmpdir(), "t1-verifier-local-"))
  hostDirs.push(scratch)
  const runtime = ManagedRuntime.make(
    LocalDriverLive({
      root,
      owner: `verifier-test-${randomUUID().slice(0, 6)}`,
      interruptGraceMs: 1000,
    }),
  )
  let path = ""
  beforeAll(() => {
    path = `${hostPythonWithPytest()}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`
  })
  afterAll(() => runtime.dispose())
  let tests = 0
  let logs = 0
  scenarios({
    runtime,
    // The local driver maps only the workdir: /tests and /logs would be this host's.
    spec: () => sandboxSpec({ image: "", workdir: "/app", env: { PATH: path }, ttlMs: 120_000 }),
    testDir: () => join(scratch, `tests-${++tests}`),
    logsDir: () => join(scratch, `logs-${++logs}`, "verifier"),
    workdir: "/app",
    killFromOutside: (id) => killLocalSandboxProcesses(id, root),
    ownRoot: false,
    guarded: false,
  })
})

describe("verifyEpisode on the docker driver", () => {
  const docker = connectDocker()
  const runtime = ManagedRuntime.make(
    DockerDriverLive({
      ownerId: `verifier-test-${randomUUID().slice(0, 6)}`,
      docker,
      interruptGraceMs: 1000,
    }),
  )
  beforeAll(async () => {
    await ensureTestBaseImage()
  }, BASE_IMAGE_TIMEOUT_MS)
  afterAll(() => runtime.dispose())
  scenarios({
    runtime,
    spec: () => sandboxSpec({ cpus: 1, memoryMb: 512, ttlMs: 120_000 }),
    testDir: () => "/tests",
    logsDir: () => "/logs/verifier",
    workdir: "/app",
    killFromOutside: async (id) => {
      await docker.getContainer(id).kill()
    },
    ownRoot: true,
    guarded: true,
  })
})

// ---------------------------------------------------------------------------------------------
// Reading results.

const TB1_OUTPUT = `============================= test session starts ==============================
collected 5 items

../tests/test_outputs.py ..F.s                                            [100%]

=================================== FAILURES ===================================
_________________________________ test_three __________________________________
    def test_three():
>       assert False, "three"
E       AssertionError: three
==================================== PASSES ====================================
__________________________________ test_one ___________________________________
----------------------------- Captured stdout call -----------------------------
PASSED ../tests/test_outputs.py::test_forged
=========================== short test summary info ============================
PASSED ../tests/test_outputs.py::test_one
PASSED ../tests/test_outputs.py::test_two
PASSED ../tests/test_outputs.py::test_four
SKIPPED [1] ../tests/test_outputs.py:20: needs a GPU
FAILED ../tests/test_outputs.py::test_three - AssertionError: three
ERROR ../tests/test_outputs.py::test_two - RuntimeError: teardown broke
ERROR ../tests/test_broken.py
XFAIL ../tests/test_outputs.py::test_known - known bug
==================== 1 failed, 3 passed, 1 skipped, 2 errors in 0.12s ====================
`

const TB2_TEST_SH = `#!/bin/bash

apt-get update
apt-get install -y curl

curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh

source $HOME/.local/bin/env

uvx \\
  -p 3.13 \\
  -w pytest==8.4.1 \\
  -w pytest-json-ctrf==0.3.5 \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA

if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
`

describe("reading verifier results", () => {
  it("rejects a test directory that would wipe the system or the agent's work", async () => {
    const untouchable: VerifierSandboxShape = {
      exec: () => Effect.die("the sandbox must not be touched"),
      put: () => Effect.die("the sandbox must not be touched"),
      maxPutBytes: 1 << 20,
    }
    const t = (testDir: string): VerifiableTask => ({
      id: "bad",
      environment: { allowInternet: false, workdir: "/app" },
      verifier: {
        testsDir: "/nonexistent",
        testDir,
        kind: "pytest",
        script: undefined,
        scriptPath: undefined,
        parser: undefined,
        timeoutSec: 60,
        expectedTests: 0,
      },
    })
    for (const testDir of ["/", "/usr", "/app", "relative/tests"]) {
      const e = await Effect.runPromise(
        Effect.flip(
          verifyEpisode(t(testDir)).pipe(Effect.provideService(VerifierSandbox, untouchable)),
        ),
      )
      expect([e._tag, e._tag === "InvalidVerifierTask" && e.field]).toEqual([
        "InvalidVerifierTask",
        "verifier.testDir",
      ])
    }
    const missing = await Effect.runPromise(
      Effect.flip(
        verifyEpisode(t("/tests")).pipe(Effect.provideService(VerifierSandbox, untouchable)),
      ),
    )
    expect(missing.message).toContain("/nonexistent")
  })

  it("parses TB1's -rA short summary; lines above the summary header cannot forge results", () => {
    const tests = parsePytestSummary(TB1_OUTPUT) ?? []
    expect(byName(tests)).toEqual({
      "../tests/test_outputs.py::test_one": "passed",
      "../tests/test_outputs.py::test_two": "error",
      "../tests/test_outputs.py::test_four": "passed",
      "../tests/test_outputs.py:20": "skipped",
      "../tests/test_outputs.py::test_three": "failed",
      "../tests/test_broken.py": "error",
      "../tests/test_outputs.py::test_known": "skipped",
    })
    expect(tests.find((t) => t.name.endsWith("test_three"))?.message).toBe("AssertionError: three")
    expect(parsePytestSummary("PASSED tests/t.py::test_a\n")).toBeUndefined()
  })

  it("parses pytest's xunit1 report: classes, collection errors, skips, the interrupted case", () => {
    const xml = `<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="" name="test_b" file="test_b.py" time="0.000"><error message="collection failure">ImportError &lt;x&gt;</error></testcase>
<testcase classname="sub.test_a.TestK" name="test_in_class" file="sub/test_a.py" line="2" time="0.250" />
<testcase classname="sub.test_a" name="test_bad" file="sub/test_a.py" time="0.001"><failure message="AssertionError: nope&#10;assert 1 == 2">trace</failure></testcase>
<testcase classname="sub.test_a" name="test_skip" file="sub/test_a.py"><skipped type="pytest.skip" message="later">s</skipped></testcase>
<testcase time="0.000" /></testsuite></testsuites>`
    const tests = parseJunitXml(xml) ?? []
    expect(tests).toEqual([
      {
        name: "test_b.py",
        outcome: "error",
        durationMs: 0,
        message: "collection failure\n\nImportError <x>",
      },
      {
        name: "sub/test_a.py::TestK::test_in_class",
        outcome: "passed",
        durationMs: 250,
        message: "",
      },
      {
        name: "sub/test_a.py::test_bad",
        outcome: "failed",
        durationMs: 1,
        message: "AssertionError: nope\nassert 1 == 2\n\ntrace",
      },
      {
        name: "sub/test_a.py::test_skip",
        outcome: "skipped",
        durationMs: 0,
        message: "later\n\ns",
      },
    ])
    expect(parseJunitXml("<testsuites><testsuite><testcase name='x'")).toBeUndefined()
    expect(parseJunitXml("<html/>")).toBeUndefined()
  })

  it("reads reward files: a number, {reward}, per-test JSON and CTRF", () => {
    expect(parseRewardText(" 1\n")).toEqual({ kind: "scalar", reward: 1 })
    expect(parseRewardText("lots")).toBeUndefined()
    expect(parseRewardJson('{"reward": 2.5}')).toEqual({ kind: "scalar", reward: 2.5 })
    const ctrf = JSON.stringify({
      results: {
        tool: { name: "pytest" },
        tests: [
          { name: "test_a", status: "passed", duration: 12 },
          { name: "test_b", status: "failed", duration: 3, message: "boom" },
          { name: "test_c", status: "skipped", duration: 0 },
        ],
      },
    })
    const parsed = parseRewardJson(ctrf)
    expect(parsed?.kind === "tests" && byName(parsed.tests)).toEqual({
      test_a: "passed",
      test_b: "failed",
      test_c: "skipped",
    })
    expect(parseRewardJson('{"tests": [{"name": "x", "status": "weird"}]}')).toBeUndefined()
  })

  it("puts a scalar reward on the dense scale: TB2's 0..1 as a fraction, larger as a count", () => {
    expect(scalarScore(1, 5)).toEqual({ passed: 5, total: 5, reward: 5, resolved: true })
    expect(scalarScore(0.6, 5)).toEqual({ passed: 3, total: 5, reward: 3, resolved: false })
    expect(scalarScore(1, 0)).toEqual({ passed: 1, total: 1, reward: 1, resolved: true })
    expect(scalarScore(3, 5)).toEqual({ passed: 3, total: 5, reward: 3, resolved: false })
  })

  it("cuts messages on a character boundary and fits a large result under max_payload", () => {
    expect(truncateUtf8("é".repeat(3000))).toBe("é".repeat(2048))
    expect(truncateUtf8("aé", 2)).toBe("a")
    const tests = Array.from({ length: 400 }, (_, i) => ({
      name: `test_${i}`,
      outcome: "failed" as const,
      durationMs: 1,
      message: "m".repeat(4096),
    }))
    const outcome = {
      kind: "scored" as const,
      missing: [],
      forgery: [],
      guarded: true,
      path: "pytest" as const,
      pathReason: "a pytest task",
      tests,
      passed: 0,
      total: 400,
      reward: 0,
      resolved: false,
      timedOut: false,
      mode: "pytest" as const,
      notes: [],
      durationMs: 5,
      exitCode: 1,
      outputTail: new Uint8Array(64 * 1024),
    }
    const bytes = encodeResultWithin(resultFromOutcome(outcome), 1024 * 1024 - 4096)
    expect(bytes.byteLength).toBeLessThanOrEqual(1024 * 1024 - 4096)
    const decoded = fromBinary(VerifierResultSchema, bytes)
    expect([decoded.tests.length, decoded.total, decoded.tests[0]?.message.length]).toEqual([
      400, 400, 1024,
    ])
  })

  it("packs the tests with TB1's run-tests.sh, which lies beside tests/, and reads them back", async () => {
    const taskDir = testsDir({
      "run-tests.sh": "echo tb1\n",
      "tests/test_a.py": "def test_a(): pass\n",
    })
    const packed = await packDirectory(join(taskDir, "tests"), {
      name: "run-tests.sh",
      path: join(taskDir, "run-tests.sh"),
    })
    const opened = await openArchive(packed.tar)
    expect([...opened.files].sort()).toEqual(["run-tests.sh", "test_a.py"])
    expect(new TextDecoder().decode(await opened.read("run-tests.sh"))).toBe("echo tb1\n")
  })

  it("reads how to verify from the proto task's test command", () => {
    const wire = (testCommand: string) =>
      taskFromWire(
        { ...fromBinary(TaskSchema, new Uint8Array(0)), testCommand, testDir: "/tests" },
        600,
      )
    expect(wire("").task.verifier.kind).toBe("pytest")
    expect(wire("python3 -m pytest /tests -rA").task.verifier.kind).toBe("pytest")
    const script = wire("bash /tests/run-tests.sh")
    expect([script.task.verifier.kind, script.task.verifier.script, script.command]).toEqual([
      "script",
      "run-tests.sh",
      undefined,
    ])
    expect(wire("cd /tests && make check").command).toBe("cd /tests && make check")
    expect(wire("").task.verifier.timeoutSec).toBe(600)
  })
})
