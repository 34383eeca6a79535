import { type TestCaseResult, type TestOutcome, truncateUtf8 } from "./outcome.ts"

/** What a script's reward file says: a number, or per-test results. */
export type RewardFile =
  | { readonly kind: "scalar"; readonly reward: number }
  | { readonly kind: "tests"; readonly tests: ReadonlyArray<TestCaseResult> }

/** reward.txt: one number (Terminal-Bench 2 writes 0 or 1). */
export const parseRewardText = (text: string): RewardFile | undefined => {
  const trimmed = text.trim()
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(trimmed)) return undefined
  const reward = Number(trimmed)
  return Number.isFinite(reward) && reward >= 0 ? { kind: "scalar", reward } : undefined
}

/**
 * reward.json or ctrf.json: a number, `{"reward": n}`, `{"tests": [...]}` or a CTRF report
 * (`{"results": {"tests": [...]}}`, what pytest-json-ctrf writes for Terminal-Bench 2). A test
 * is `{name, status|outcome, duration|durationMs?, message?|trace?}`.
 */
export const parseRewardJson = (text: string): RewardFile | undefined => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof value === "number") return parseRewardText(String(value))
  const object = record(value)
  if (object === undefined) return undefined
  const list = Array.isArray(object.tests)
    ? object.tests
    : Array.isArray(record(object.results)?.tests)
      ? (record(object.results)?.tests as ReadonlyArray<unknown>)
      : undefined
  if (list !== undefined) {
    const tests = list.flatMap((t) => testOf(t) ?? [])
    return tests.length === list.length ? { kind: "tests", tests } : undefined
  }
  if (typeof object.reward === "number") return parseRewardText(String(object.reward))
  return undefined
}

const record = (value: unknown): Readonly<Record<string, unknown>> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Readonly<Record<string, unknown>>)
    : undefined

/** CTRF statuses (passed, failed, skipped, pending, other) and ours. */
const OUTCOMES: Readonly<Record<string, TestOutcome>> = {
  passed: "passed",
  pass: "passed",
  failed: "failed",
  fail: "failed",
  error: "error",
  errored: "error",
  other: "error",
  skipped: "skipped",
  pending: "skipped",
}

const testOf = (value: unknown): TestCaseResult | undefined => {
  const t = record(value)
  if (t === undefined || typeof t.name !== "string" || t.name === "") return undefined
  const status = typeof t.status === "string" ? t.status : t.outcome
  const outcome = typeof status === "string" ? OUTCOMES[status.toLowerCase()] : undefined
  if (outcome === undefined) return undefined
  const duration = typeof t.durationMs === "number" ? t.durationMs : t.duration
  const message = [t.message, t.trace].filter((m) => typeof m === "string" && m !== "").join("\n")
  return {
    name: t.name,
    outcome,
    durationMs: typeof duration === "number" && duration > 0 ? Math.round(duration) : 0,
    message: outcome === "passed" ? "" : truncateUtf8(message),
  }
}
