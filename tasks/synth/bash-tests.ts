/**
 * Building a task's test script (tests/test.sh) in bash: one function per checked aspect, so the
 * reward is dense, and a CTRF report in /logs/verifier/ctrf.json with one entry per test, which
 * the verifier reads as pytest's per-test results. A bash test costs a few milliseconds where a
 * pytest run costs a Python start and pytest's imports (about 0.4 CPU-seconds): for the ladder's
 * one-command tasks that was most of an episode (issue 14).
 */

export interface BashTestCase {
  /** Without the `test_` prefix; snake_case. */
  readonly name: string
  /** One line: what the test checks (the report's message when it fails). */
  readonly doc: string
  /** Bash statements, unindented; the test passes when the last one succeeds. */
  readonly body: ReadonlyArray<string>
}

/** The lines that name the workdir and the report directory; a local run points them elsewhere. */
export const BASH_APP_LINE = "APP=/app"
export const BASH_LOGS_LINE = "LOGS=/logs/verifier"

/**
 * Helpers a script has when its tests call them (decontamination counts every shared word
 * n-gram, so a script carries no text it does not use). `lines` reads a file's lines into `L`
 * as Python's splitlines would for \n-separated text (a path that is not a file fails);
 * `has_line` says whether `L` holds a line.
 */
const HELPERS: ReadonlyArray<readonly [string, string]> = [
  ["lines", 'lines() { L=(); [ -f "$1" ] && mapfile -t L < "$1"; }'],
  [
    "has_line",
    'has_line() { local l; for l in "${L[@]}"; do [ "$l" = "$1" ] && return 0; done; return 1; }',
  ],
]

/**
 * The script and its number of tests. `guard` (bash statements) runs before every test, as a
 * pytest autouse fixture would: a failed guard fails the test.
 */
export const bashTestScript = (
  cases: ReadonlyArray<BashTestCase>,
  guard: ReadonlyArray<string> = [],
): { readonly tests: string; readonly expectedTests: number } => {
  const names = new Set<string>()
  for (const c of cases) {
    if (!/^[a-z][a-z0-9_]*$/.test(c.name)) throw new Error(`test name ${c.name} is not snake_case`)
    if (names.has(c.name)) throw new Error(`duplicate test name ${c.name}`)
    names.add(c.name)
  }
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
    // Each test runs in the workdir, in a subshell. The report lists each test's status under
    // results.tests, as a CTRF report does (without the summary, which the verifier does not
    // read; shared text is kept small for decontamination). The exit status says whether every
    // test passed, as pytest's does.
    `for t in ${cases.map((c) => c.name).join(" ")}; do`,
    '  ( cd "$APP" && guard && test_$t ) &>/dev/null && s=passed || s=failed f=1',
    '  R+=("{\\"name\\":\\"test_$t\\",\\"status\\":\\"$s\\"}")',
    "done",
    'mkdir -p "$LOGS"; echo "{\\"results\\":{\\"tests\\":[$(IFS=,; echo "${R[*]}")]}}" >"$LOGS/ctrf.json"',
    "exit ${f:-0}",
    "",
  ].join("\n")
  return { tests: script, expectedTests: cases.length }
}
