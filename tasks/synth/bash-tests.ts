/**
 * Building a task's test script (tests/test.sh) in bash: one function per checked aspect, so the
 * reward is dense, and a CTRF report in /logs/verifier/ctrf.json with one entry per test, which
 * the verifier reads as pytest's per-test results. A bash test costs a few milliseconds where a
 * pytest run costs a Python start and pytest's imports (about 0.4 CPU-seconds): for the ladder's
 * one-command tasks that was most of an episode (issue 14).
 */
import { checkTestNames } from "./pytest.ts"

export interface BashTestCase {
  /** Without the `test_` prefix; snake_case. */
  readonly name: string
  /** One line: what the test checks (a comment above its function). */
  readonly doc: string
  /** Bash statements, unindented; the test passes when the last one succeeds. */
  readonly body: ReadonlyArray<string>
}

/** The lines that name the workdir and the report directory; a local run points them elsewhere. */
export const BASH_APP_LINE = "APP=/app"
export const BASH_LOGS_LINE = "LOGS=/logs/verifier"

/**
 * Helpers a script has when its tests call them (decontamination counts shared word n-grams, so
 * a script carries no text it does not use). None forks a process: a fork costs several
 * milliseconds in a sandbox, and a verification runs one per episode. `load` reads a regular
 * file's bytes into `text` (up to a NUL byte); `lines` reads its lines into `L` as Python's
 * splitlines would for \n-separated text; `has_line` says whether `L` holds a line;
 * `empty_dir` says whether a folder has no entries, hidden ones included.
 */
const HELPERS: ReadonlyArray<readonly [string, string]> = [
  [
    "load",
    `load() { text=; [ -f "$1" ] && [ -r "$1" ] && { IFS= read -r -d '' text <"$1"; true; }; }`,
  ],
  ["lines", 'lines() { L=(); [ -f "$1" ] && [ -r "$1" ] && mapfile -t L <"$1"; }'],
  [
    "has_line",
    'has_line() { local l; for l in "${L[@]}"; do [ "$l" = "$1" ] && return 0; done; return 1; }',
  ],
  [
    "empty_dir",
    'empty_dir() { local e; shopt -s dotglob; e=("$1"/*); shopt -u dotglob; [ -d "$1" ] && [ ${#e[@]} -eq 0 ]; }',
  ],
]

/**
 * The script and its number of tests. Tests only read the workdir (and leave shell options as
 * they found them), so `guard` (bash statements) runs once, before them, in the workdir: a
 * failed guard fails every test, as a pytest autouse fixture failing for each would.
 */
export const bashTestScript = (
  cases: ReadonlyArray<BashTestCase>,
  guard: ReadonlyArray<string> = [],
): { readonly tests: string; readonly expectedTests: number } => {
  checkTestNames(cases)
  const body = (lines: ReadonlyArray<string>) =>
    lines.length === 0 ? "  true" : lines.map((l) => `  ${l}`).join("\n")
  const functions = cases.map(
    (c) => `# ${c.doc.replaceAll("\n", " ")}\ntest_${c.name}() {\n${body(c.body)}\n}`,
  )
  const code = [...guard, ...cases.flatMap((c) => c.body)].join("\n")
  const helpers = HELPERS.filter(([name]) => new RegExp(`(^|[^\\w$])${name}\\b`).test(code)).map(
    ([, text]) => text,
  )
  const script = [
    "#!/bin/bash",
    BASH_APP_LINE,
    BASH_LOGS_LINE,
    "shopt -s globstar nullglob",
    "",
    ...(helpers.length === 0 ? [] : [...helpers, ""]),
    `guard() {\n${body(guard)}\n}`,
    "",
    ...functions.flatMap((f) => [f, ""]),
    // The report lists each test's status under results.tests, as a CTRF report does (without
    // the summary, which the verifier does not read). The exit status says whether every test
    // passed, as pytest's does.
    'cd "$APP" && guard &>/dev/null && g=passed || g=failed',
    `for t in ${cases.map((c) => c.name).join(" ")}; do`,
    "  [ $g = passed ] && test_$t &>/dev/null && s=passed || s=failed f=1",
    '  R+=("{\\"name\\":\\"test_$t\\",\\"status\\":\\"$s\\"}")',
    "done",
    '[ -d "$LOGS" ] || mkdir -p "$LOGS"',
    "IFS=,",
    'echo "{\\"results\\":{\\"tests\\":[${R[*]}]}}" >"$LOGS/ctrf.json"',
    "exit ${f:-0}",
    "",
  ].join("\n")
  return { tests: script, expectedTests: cases.length }
}
