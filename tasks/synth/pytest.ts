/** Building a task's pytest file: one function per checked aspect, so the reward is dense. */

export type PyValue =
  | string
  | number
  | boolean
  | null
  | ReadonlyArray<PyValue>
  | { readonly [key: string]: PyValue }

/** A Python literal for a JSON-like value (strings as JSON strings, which Python accepts). */
export const py = (value: PyValue): string => {
  if (value === null) return "None"
  if (typeof value === "boolean") return value ? "True" : "False"
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new RangeError(`py: ${value} has no literal`)
    return String(value)
  }
  if (typeof value === "string") return JSON.stringify(value)
  if (Array.isArray(value)) return `[${value.map(py).join(", ")}]`
  const entries = Object.entries(value as { readonly [key: string]: PyValue })
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${py(v)}`).join(", ")}}`
}

export interface TestCase {
  /** Without the `test_` prefix; snake_case. */
  readonly name: string
  /** One line: what the test checks (its docstring). */
  readonly doc: string
  /** Python statements, unindented. */
  readonly body: ReadonlyArray<string>
}

const PREAMBLE = `import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")
`

/**
 * The test file and its number of tests. `helpers` is module-level Python (constants, small
 * functions) placed after the imports: the shared ones, or `preamble` when given (which must
 * define APP).
 */
/** Test names (without `test_`) are snake_case and distinct; else a generator bug, thrown. */
export const checkTestNames = (cases: ReadonlyArray<{ readonly name: string }>): void => {
  const names = new Set<string>()
  for (const c of cases) {
    if (!/^[a-z][a-z0-9_]*$/.test(c.name)) throw new Error(`test name ${c.name} is not snake_case`)
    if (names.has(c.name)) throw new Error(`duplicate test name ${c.name}`)
    names.add(c.name)
  }
}

export const pytestFile = (
  cases: ReadonlyArray<TestCase>,
  helpers: ReadonlyArray<string> = [],
  preamble: string = PREAMBLE,
): { readonly tests: string; readonly expectedTests: number } => {
  checkTestNames(cases)
  const functions = cases.map(
    (c) =>
      `def test_${c.name}():\n    ${JSON.stringify(c.doc)}\n${c.body
        .flatMap((l) => l.split("\n"))
        .map((l) => (l === "" ? "" : `    ${l}`))
        .join("\n")}\n`,
  )
  const head = helpers.length > 0 ? `${preamble}\n${helpers.join("\n")}\n` : preamble
  return { tests: `${head}\n\n${functions.join("\n\n")}`, expectedTests: cases.length }
}
