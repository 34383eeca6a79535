/** What verifying one episode found: per-test results and the dense reward. */

export type TestOutcome = "passed" | "failed" | "error" | "skipped"

/** When one test is reported twice (a pass, then an error in teardown; two pytest calls), the worse stays. */
export const OUTCOME_RANK: Readonly<Record<TestOutcome, number>> = {
  skipped: 0,
  passed: 1,
  failed: 2,
  error: 3,
}

export interface TestCaseResult {
  /** As the framework names it, e.g. "test_outputs.py::test_file" (relative to the test dir). */
  readonly name: string
  readonly outcome: TestOutcome
  /** 0 when unknown. */
  readonly durationMs: number
  /** Failure, error or skip message, at most MAX_MESSAGE_BYTES of UTF-8; "" when passed. */
  readonly message: string
}

/**
 * Where the per-test results came from:
 * - pytest: pytest's JUnit XML report (pytest tasks, and script tasks run by the rewritten path);
 * - reward-file: the script wrote /logs/verifier/{ctrf.json,reward.json,reward.txt};
 * - pytest-summary: pytest's `-rA` short summary in the script's output (TB1's "pytest" parser);
 * - exit-code: nothing else: the script's exit status, 0 = 1/1, else 0 of the tests pytest
 *   collects in the test directory (0/1 when it collects none);
 * - none: the tests did not run (an unverifiable outcome).
 */
export type VerifierMode = "pytest" | "reward-file" | "pytest-summary" | "exit-code" | "none"

/**
 * Which command ran:
 * - pytest: t1's pytest on the test files (pytest tasks);
 * - script: the task's test script as written;
 * - rewritten-script: the task's script with its network bootstrap of the test runner removed
 *   and its pytest call run by the sandbox's pytest with the same arguments (see rewrite.ts).
 */
export type VerifierPath = "pytest" | "script" | "rewritten-script"

/**
 * scored: the tests ran and the counts are the agent's score. unverifiable: the tests need
 * packages the sandbox does not have (named in `missing`), so no score exists: like an infra
 * failure it is excluded from training and statistics, never a reward of 0. forged: the run's
 * results cannot be trusted (a canary test came out wrong, a test file changed during the run;
 * `forgery` says which): scored with reward 0, passed 0, not resolved, so that forging earns
 * nothing; the tests stay listed as reported, for diagnosis.
 */
export type VerifierOutcomeKind = "scored" | "unverifiable" | "forged"

export interface VerifierOutcome {
  readonly kind: VerifierOutcomeKind
  /** Packages the test script asks for that the sandbox lacks (set when unverifiable). */
  readonly missing: ReadonlyArray<string>
  /** Why the results cannot be trusted, one sentence each (set when forged). */
  readonly forgery: ReadonlyArray<string>
  /**
   * False: verified with the sandbox's own shell and Python (a driver that cannot seal, such as
   * the local driver, or a sandbox created without the toolchain), which the agent could have
   * replaced; the notes say why.
   */
  readonly guarded: boolean
  readonly path: VerifierPath
  /** Why that path was taken, in a sentence. */
  readonly pathReason: string
  readonly tests: ReadonlyArray<TestCaseResult>
  /** Tests that passed. */
  readonly passed: number
  /** Tests that ran or should have run (skipped tests are listed but not counted). */
  readonly total: number
  /** Dense reward: the number of passing tests (or a reward file's number). */
  readonly reward: number
  /** total > 0 and every counted test passed. */
  readonly resolved: boolean
  /** The test command was stopped at the task's verifier timeout. */
  readonly timedOut: boolean
  readonly mode: VerifierMode
  /** Why the result looks the way it does (fallbacks taken, files ignored, timeouts). */
  readonly notes: ReadonlyArray<string>
  /** Wall-clock time of the whole verification: upload, run, read-back. */
  readonly durationMs: number
  /** The test command's exit status (-1 when it was stopped or its shell died). */
  readonly exitCode: number
  /** Tail of the test command's output, at most MAX_OUTPUT_TAIL_BYTES. */
  readonly outputTail: Uint8Array
}

export const MAX_MESSAGE_BYTES = 4096
export const MAX_OUTPUT_TAIL_BYTES = 64 * 1024

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** `text` cut to at most `maxBytes` of UTF-8, never inside a character. */
export const truncateUtf8 = (text: string, maxBytes: number = MAX_MESSAGE_BYTES): string => {
  const bytes = encoder.encode(text)
  if (bytes.byteLength <= maxBytes) return text
  let end = maxBytes
  // Back off continuation bytes (10xxxxxx) so the cut falls on a character boundary.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--
  return decoder.decode(bytes.subarray(0, end))
}

export interface Score {
  readonly passed: number
  readonly total: number
  readonly reward: number
  readonly resolved: boolean
}

/**
 * Dense reward from per-test results. `expectedTests` is a floor on the total when the run was
 * cut short or reported nothing, so that a verifier that stopped early cannot look complete.
 */
export const scoreTests = (
  tests: ReadonlyArray<TestCaseResult>,
  floor: { readonly expectedTests: number; readonly apply: boolean },
): Score => {
  const passed = tests.filter((t) => t.outcome === "passed").length
  const counted = tests.filter((t) => t.outcome !== "skipped").length
  const total = floor.apply ? Math.max(counted, floor.expectedTests) : counted
  return { passed, total, reward: passed, resolved: total > 0 && passed === total }
}
