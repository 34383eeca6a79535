import type { TestCaseResult } from "./outcome.ts"

/** `site-packages/` or `dist-packages/` and what follows it. */
const SITE_DIR = /\/(?:site|dist)-packages\/(.+)$/

/**
 * The top-level module a file under a Python site directory belongs to: `requests` for
 * `…/dist-packages/requests/api.py`, `six` for `…/six.py`, `_yaml` for
 * `…/_yaml.cpython-311-x86_64-linux-gnu.so`; undefined for metadata (`*.dist-info`, `*.pth`).
 */
export const moduleOf = (path: string): string | undefined => {
  const rest = SITE_DIR.exec(path)?.[1]
  if (rest === undefined) return undefined
  const first = rest.split("/")[0] ?? ""
  if (/\.(dist-info|egg-info|pth)$/.test(first) || first === "__pycache__") return undefined
  const name = rest.includes("/") ? first : first.replace(/\..*$/, "")
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : undefined
}

/** Modules a failure message says were missing or broken on import. */
const IMPORT_FAILURES = [
  /No module named '([^']+)'/g,
  /cannot import name '[^']+' from '([^'(]+)'/g,
  /module '([^']+)' has no attribute/g,
]

/**
 * Notes naming the tests that failed for want of modules the agent had installed or changed
 * under the Python site directories, which the verifier took from the image instead
 * (`files`: what the seal restored or removed there). A task author reads from them that the
 * task's tests depend on a library the agent installs, which t1 does not let tests import.
 */
export const blamePristine = (
  tests: ReadonlyArray<TestCaseResult>,
  files: ReadonlyArray<string>,
): ReadonlyArray<string> => {
  const modules = new Set(files.flatMap((f) => moduleOf(f) ?? []))
  if (modules.size === 0) return []
  const blamed = new Map<string, Set<string>>()
  for (const test of tests) {
    if (test.outcome !== "failed" && test.outcome !== "error") continue
    for (const pattern of IMPORT_FAILURES)
      for (const match of test.message.matchAll(pattern)) {
        const top = (match[1] ?? "").split(".")[0] ?? ""
        if (!modules.has(top)) continue
        const names = blamed.get(top) ?? new Set<string>()
        names.add(test.name)
        blamed.set(top, names)
      }
  }
  return [...blamed].map(
    ([module, names]) =>
      `${[...names].join(", ")} failed importing ${module}, which the agent had installed or changed under the Python site directories and the verifier took from the image instead: tests may import only the image's libraries`,
  )
}
