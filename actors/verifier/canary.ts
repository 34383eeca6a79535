/**
 * Canaries: a test file of the verifier's own, added to every pytest run it controls, with one
 * test that must pass and one that must fail. Code of the agent's that runs inside pytest (a
 * module the tests import, a plugin) can rewrite what pytest reports; it cannot do so for the
 * task's tests alone without knowing which tests are the verifier's, so their names are fresh and
 * random each run and the file reads like any other test file. A canary reported the wrong way
 * (or not at all, in a report that has results) means the report is not pytest's own.
 */
import { randomBytes, randomInt } from "node:crypto"
import { posix } from "node:path"
import type { TestCaseResult } from "./outcome.ts"

/**
 * Canaries appended to one of the task's own test files: they run in its module, after whatever
 * it imports (the agent's code among it), so a forger that spares the tests of modules that do
 * not import its code spares none of them.
 */
export interface Appended {
  /** The test file's path in the test directory, as the archive names it. */
  readonly path: string
  /** What is appended to it. */
  readonly code: string
  /** The file as the verifier uploads it: the task's text, then `code`. */
  readonly text: string
  readonly mustPass: string
  readonly mustFail: string
}

export interface Canaries {
  /** The file's name in the test directory, e.g. `test_layout_3fa9c1.py`. */
  readonly file: string
  readonly text: string
  readonly mustPass: ReadonlyArray<string>
  readonly mustFail: ReadonlyArray<string>
  /** Canaries appended to the task's test files (pytest tasks only). */
  readonly appended: ReadonlyArray<Appended>
}

const WORDS = [
  ...["parse", "values", "format", "output", "config", "result", "records", "lookup"],
  ...["merge", "split", "counts", "layout", "order", "limits", "index", "encode"],
  ...["totals", "fields", "header", "rows", "tokens", "paths", "ranges", "keys"],
]

const word = () => WORDS[randomInt(WORDS.length)] ?? "values"
const suffix = () => randomBytes(3).toString("hex")

/** A test asserting a computed value: equal to it when `passes`, off by a little when not. */
const testBody = (name: string, passes: boolean): string => {
  const off = passes ? 0 : randomInt(1, 10)
  if (randomInt(2) === 0) {
    const values = Array.from({ length: randomInt(3, 7) }, () => randomInt(1, 100))
    const sum = values.reduce((a, b) => a + b, 0)
    return `def ${name}():\n    values = [${values.join(", ")}]\n    assert sum(values) == ${sum + off}\n`
  }
  const text = randomBytes(randomInt(4, 12)).toString("hex")
  return `def ${name}():\n    text = "${text}"\n    assert len(text.upper()) == ${text.length + off}\n`
}

/**
 * A fresh canary file whose name is none of `taken` (the task's own test files), made from
 * `pattern` (one `*`), as pytest's python_files names test files.
 */
export const makeCanaries = (taken: ReadonlySet<string>, pattern = "test_*.py"): Canaries => {
  const name = () => pattern.replace("*", `${word()}_${suffix()}`)
  let file = name()
  while (taken.has(file)) file = name()
  const pass = `test_${word()}_${suffix()}`
  let fail = `test_${word()}_${suffix()}`
  while (fail === pass) fail = `test_${word()}_${suffix()}`
  const tests = [testBody(pass, true), testBody(fail, false)]
  if (randomInt(2) === 0) tests.reverse()
  return { file, text: tests.join("\n\n"), mustPass: [pass], mustFail: [fail], appended: [] }
}

/** `canaries` with a must-pass and a must-fail test appended to each of `files` (their texts). */
export const appendCanaries = (
  canaries: Canaries,
  files: ReadonlyArray<{ readonly path: string; readonly text: string }>,
): Canaries => {
  const used = new Set([...canaries.mustPass, ...canaries.mustFail])
  const fresh = () => {
    let name = `test_${word()}_${suffix()}`
    while (used.has(name) || files.some((f) => f.text.includes(name)))
      name = `test_${word()}_${suffix()}`
    used.add(name)
    return name
  }
  const appended = files.map(({ path, text }) => {
    const mustPass = fresh()
    const mustFail = fresh()
    const tests = [testBody(mustPass, true), testBody(mustFail, false)]
    if (randomInt(2) === 0) tests.reverse()
    const code = `\n\n${tests.join("\n\n")}`
    return { path, code, text: `${text}${code}`, mustPass, mustFail }
  })
  return { ...canaries, appended }
}

/** The function of a pytest node id (`f.py::K::test_y[1]` → `test_y`). */
const functionOf = (name: string) => (name.split("::").at(-1) ?? "").replace(/\[.*$/, "")

/** The file part of a pytest node id (`sub/test_x.py::TestK::test_y` → `sub/test_x.py`). */
const fileOf = (name: string) => name.split("::")[0] ?? name

/** The result belongs to the canary file: one of its tests, or its collection error. */
export const isCanary = (canaries: Canaries, name: string): boolean =>
  posix.basename(fileOf(name)) === canaries.file ||
  (name.includes("::") &&
    canaries.appended.some((a) => {
      const fn = functionOf(name)
      return fn === a.mustPass || fn === a.mustFail
    }))

const resultOf = (
  canaries: Canaries,
  tests: ReadonlyArray<TestCaseResult>,
  fn: string,
): TestCaseResult | undefined =>
  tests.find((t) => isCanary(canaries, t.name) && t.name.endsWith(`::${fn}`)) ??
  // A collection error of the file stands for each of its tests.
  tests.find((t) => isCanary(canaries, t.name) && !t.name.includes("::"))

/**
 * What is wrong with the canaries in one report, one sentence each; empty when nothing is.
 * `complete`: the run reported results and was not cut short, so every canary must be there.
 * Evidence is what pytest itself never reports: a must-fail canary that passed, a must-pass
 * canary whose plain assert failed, a canary missing from a complete run, a must-fail canary
 * skipped beside tests that passed. An error is not (a task's conftest may have an autouse
 * fixture that errors for every test, canaries included, when the agent's work is missing), and
 * earns a forger nothing: it does not count as a pass.
 */
export const canaryEvidence = (
  canaries: Canaries,
  tests: ReadonlyArray<TestCaseResult>,
  complete: boolean,
  where: string,
): string[] => {
  const evidence: string[] = []
  const id = (fn: string) => `${canaries.file}::${fn}`
  // A skip is not counted: failures turned into skips leave only passes, which reads as
  // resolved. Where nothing passed (a conftest that skips everything) it lifts nothing.
  const anyPassed = tests.some((t) => t.outcome === "passed" && !isCanary(canaries, t.name))
  for (const fn of canaries.mustFail) {
    const r = resultOf(canaries, tests, fn)
    if (r?.outcome === "passed") evidence.push(`canary ${id(fn)} must fail but passed ${where}`)
    else if (r?.outcome === "skipped" && anyPassed)
      evidence.push(`canary ${id(fn)} must fail but was skipped ${where}`)
    else if (r === undefined && complete)
      evidence.push(`canary ${id(fn)} must fail but is missing ${where}`)
  }
  if (!complete) return evidence
  for (const fn of canaries.mustPass) {
    const r = resultOf(canaries, tests, fn)
    if (r === undefined) evidence.push(`canary ${id(fn)} must pass but is missing ${where}`)
    else if (r.outcome === "failed") evidence.push(`canary ${id(fn)} must pass but failed ${where}`)
  }
  evidence.push(...appendedEvidence(canaries.appended, tests, complete, where))
  return evidence
}

/** Whether a reported name is the file `path` (relative to the test directory, or deeper). */
const sameFile = (name: string, path: string) => {
  const file = fileOf(name)
  return file === path || file.endsWith(`/${path}`)
}

/**
 * The appended canaries' evidence. Their module is the task's: when it reports as a whole (a
 * collection error, a module-level skip) or skips its tests (a module `pytestmark`), its canaries
 * say nothing. Otherwise the same rules as the canary file's.
 */
const appendedEvidence = (
  appended: ReadonlyArray<Appended>,
  tests: ReadonlyArray<TestCaseResult>,
  complete: boolean,
  where: string,
): string[] =>
  appended.flatMap((a) => {
    const mine = tests.filter((t) => sameFile(t.name, a.path))
    if (mine.some((t) => !t.name.includes("::"))) return []
    const find = (fn: string) => mine.find((t) => functionOf(t.name) === fn)
    const pass = find(a.mustPass)
    const fail = find(a.mustFail)
    const id = (fn: string) => `${a.path}::${fn}`
    const out: string[] = []
    if (fail?.outcome === "passed")
      out.push(`canary ${id(a.mustFail)} must fail but passed ${where}`)
    if (pass?.outcome === "failed")
      out.push(`canary ${id(a.mustPass)} must pass but failed ${where}`)
    if (complete && mine.length > 0) {
      if (fail === undefined) out.push(`canary ${id(a.mustFail)} must fail but is missing ${where}`)
      if (pass === undefined) out.push(`canary ${id(a.mustPass)} must pass but is missing ${where}`)
    }
    return out
  })
