import { OUTCOME_RANK, type TestCaseResult, type TestOutcome, truncateUtf8 } from "./outcome.ts"

/** pytest's `-rA` status words; xfail counts as skipped and xpass as passed, as in its XML. */
const STATUS: Readonly<Record<string, TestOutcome>> = {
  PASSED: "passed",
  XPASS: "passed",
  FAILED: "failed",
  ERROR: "error",
  SKIPPED: "skipped",
  XFAIL: "skipped",
}

const HEADER = /^=+ short test summary info =+$/
const LINE = /^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (.+)$/
/** `SKIPPED [2] tests/test_x.py:12: reason` */
const SKIP_DETAIL = /^\[\d+\] (\S+): ?(.*)$/

/**
 * Per-test results from pytest's `-rA` short test summary, as Terminal-Bench 1's "pytest" parser
 * reads it: only the lines after the last "short test summary info" header count, so text a
 * test printed earlier (captured output is shown above the summary) cannot forge a result.
 * Returns undefined when the output has no summary.
 */
export const parsePytestSummary = (output: string): ReadonlyArray<TestCaseResult> | undefined => {
  const lines = output.split(/\r?\n/)
  let start = -1
  for (let i = lines.length - 1; i >= 0; i--) {
    if (HEADER.test((lines[i] ?? "").trim())) {
      start = i + 1
      break
    }
  }
  if (start < 0) return undefined
  const byName = new Map<string, TestCaseResult>()
  for (const raw of lines.slice(start)) {
    const line = raw.trimEnd()
    // The summary ends at the closing "=== 1 failed, 2 passed in 0.1s ===" (or "!!! … !!!").
    if (line.startsWith("=") || line.startsWith("!")) break
    const match = LINE.exec(line)
    if (match === null) continue
    const outcome = STATUS[match[1] ?? ""] ?? "error"
    const rest = match[2] ?? ""
    const skip = outcome === "skipped" ? SKIP_DETAIL.exec(rest) : null
    const [name, message] =
      skip !== null ? [skip[1] ?? "", skip[2] ?? ""] : splitMessage(rest, outcome === "passed")
    const known = byName.get(name)
    if (known !== undefined && OUTCOME_RANK[known.outcome] > OUTCOME_RANK[outcome]) continue
    byName.set(name, { name, outcome, durationMs: 0, message: truncateUtf8(message) })
  }
  return [...byName.values()]
}

/** `tests/t.py::test_a - AssertionError: …` → the node id and the message. */
const splitMessage = (rest: string, passed: boolean): [string, string] => {
  const at = rest.indexOf(" - ")
  if (at < 0 || passed) return [rest.trim(), ""]
  return [rest.slice(0, at).trim(), rest.slice(at + 3)]
}
