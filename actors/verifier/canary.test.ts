import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { appendCanaries, canaryEvidence, isCanary, makeCanaries } from "./canary.ts"
import type { TestCaseResult, TestOutcome } from "./outcome.ts"

const result = (name: string, outcome: TestOutcome): TestCaseResult => ({
  name,
  outcome,
  durationMs: 0,
  message: "",
})

describe("canaries", () => {
  it("are fresh each run, avoid the task's file names, and one passes, one fails under Python", () => {
    const a = makeCanaries(new Set())
    const b = makeCanaries(new Set())
    expect(a.file).toMatch(/^test_[a-z]+_[0-9a-f]{6}\.py$/)
    expect([a.file, ...a.mustPass, ...a.mustFail]).not.toEqual([
      b.file,
      ...b.mustPass,
      ...b.mustFail,
    ])
    expect(a.text).not.toMatch(/canary/i)
    // Named as the task's python_files says test files are, so that discovery finds it.
    expect(makeCanaries(new Set(), "check_*.py").file).toMatch(/^check_[a-z]+_[0-9a-f]{6}\.py$/)
    const dir = mkdtempSync(join(tmpdir(), "t1-canary-"))
    try {
      writeFileSync(join(dir, "c.py"), a.text)
      const run = (fn: string) =>
        execFileSync("python3", ["-c", `import c; c.${fn}()`], { cwd: dir, stdio: "pipe" })
      for (const fn of a.mustPass) expect(() => run(fn)).not.toThrow()
      for (const fn of a.mustFail) expect(() => run(fn)).toThrow(/AssertionError/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("tell a report that is not pytest's own: wrong outcomes, missing tests, hidden failures", () => {
    const c = makeCanaries(new Set())
    const pass = `${c.file}::${c.mustPass[0]}`
    const fail = `${c.file}::${c.mustFail[0]}`
    const task = result("test_work.py::test_1", "failed")
    const honest = [task, result(pass, "passed"), result(fail, "failed")]
    expect(canaryEvidence(c, honest, true, "here")).toEqual([])
    expect(
      canaryEvidence(c, [task, result(pass, "passed"), result(fail, "passed")], true, "here"),
    ).toEqual([`canary ${fail} must fail but passed here`])
    // A skip is not counted: turning failures into skips hides them.
    const passing = result("test_work.py::test_2", "passed")
    expect(
      canaryEvidence(c, [passing, result(pass, "passed"), result(fail, "skipped")], false, "here"),
    ).toEqual([`canary ${fail} must fail but was skipped here`])
    // A conftest that skips every test (canaries too) lifts nothing: no evidence.
    expect(
      canaryEvidence(
        c,
        [
          result("test_work.py::test_1", "skipped"),
          result(pass, "skipped"),
          result(fail, "skipped"),
        ],
        true,
        "here",
      ),
    ).toEqual([])
    expect(canaryEvidence(c, [task], true, "here")).toEqual([
      `canary ${fail} must fail but is missing here`,
      `canary ${pass} must pass but is missing here`,
    ])
    expect(
      canaryEvidence(c, [task, result(pass, "failed"), result(fail, "failed")], true, "here"),
    ).toEqual([`canary ${pass} must pass but failed here`])
    // An autouse fixture of the task's conftest that errors for every test: no evidence.
    expect(
      canaryEvidence(
        c,
        [result("test_work.py::test_1", "error"), result(pass, "error"), result(fail, "error")],
        true,
        "here",
      ),
    ).toEqual([])
    // Cut short (a timeout) or nothing reported: missing or unfinished canaries are no evidence.
    expect(canaryEvidence(c, [task], false, "here")).toEqual([])
    expect(canaryEvidence(c, [task, result(pass, "failed")], false, "here")).toEqual([])
    // Results named from another root (a rewritten script's call elsewhere) still match.
    expect(isCanary(c, `../../tests/${pass}`)).toBe(true)
    expect(isCanary(c, c.file)).toBe(true)
    expect(isCanary(c, "test_work.py::test_1")).toBe(false)
  })

  it("appended to the task's files: a forger sparing modules that do not import its code is caught", () => {
    const base = makeCanaries(new Set())
    const c = appendCanaries(base, [{ path: "sub/test_release.py", text: "import solution\n" }])
    const a = c.appended[0]
    if (a === undefined) throw new Error("no appended canaries")
    expect(a.code).toContain(`def ${a.mustPass}():`)
    expect(a.code).toContain(`def ${a.mustFail}():`)
    expect(isCanary(c, `sub/test_release.py::${a.mustFail}`)).toBe(true)
    const own = [
      result(`${base.file}::${base.mustPass[0]}`, "passed"),
      result(`${base.file}::${base.mustFail[0]}`, "failed"),
    ]
    const release = (pass: TestOutcome, fail: TestOutcome) => [
      result("sub/test_release.py::test_version", "passed"),
      result(`sub/test_release.py::${a.mustPass}`, pass),
      result(`sub/test_release.py::${a.mustFail}`, fail),
    ]
    expect(canaryEvidence(c, [...own, ...release("passed", "failed")], true, "here")).toEqual([])
    // Everything in the module that imported the forger's code passes: its canary too.
    expect(canaryEvidence(c, [...own, ...release("passed", "passed")], true, "here")).toEqual([
      `canary sub/test_release.py::${a.mustFail} must fail but passed here`,
    ])
    // The module did not import (the agent's code is missing) or skipped as a whole: no evidence.
    expect(
      canaryEvidence(c, [...own, result("sub/test_release.py", "error")], true, "here"),
    ).toEqual([])
    expect(canaryEvidence(c, [...own, ...release("skipped", "skipped")], true, "here")).toEqual([])
    // A complete report with the module's tests but not its canaries.
    expect(
      canaryEvidence(
        c,
        [...own, result("sub/test_release.py::test_version", "passed")],
        true,
        "here",
      ),
    ).toHaveLength(2)
  })
})
