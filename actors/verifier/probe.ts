import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import type { VerifierInfraError } from "./errors.ts"
import type { VerifierSandboxShape } from "./port.ts"
import type { Requirement } from "./rewrite.ts"
import { runBookkeeping, shellQuote } from "./shell.ts"

/** What the sandbox has of what a rewritten test script needs. */
export interface SandboxPackages {
  /** The interpreter imports pytest. */
  readonly pytest: boolean
  /** Requirements it lacks, as the script wrote them. */
  readonly missing: ReadonlyArray<Requirement>
}

/**
 * Looks for each distribution by its metadata, else for a module of the same name; `-I` keeps
 * the agent's working directory and PYTHON* variables out of the interpreter's path.
 */
const PYTHON_PROBE = `import json, sys, importlib.util as u
from importlib import metadata as m
def has(n):
    try:
        m.distribution(n)
        return True
    except Exception:
        pass
    try:
        return u.find_spec(n.replace("-", "_")) is not None
    except Exception:
        return False
names = json.loads(sys.argv[2])
print(sys.argv[1], json.dumps({"pytest": u.find_spec("pytest") is not None, "missing": [n for n in names if not has(n)]}))`

/**
 * Asks the sandbox whether `python` has pytest and which requirements are missing: Python ones
 * by distribution, system ones as an installed dpkg package or a command of that name.
 */
export const probePackages = (
  sandbox: VerifierSandboxShape,
  python: string,
  requirements: ReadonlyArray<Requirement>,
): Effect.Effect<SandboxPackages, VerifierInfraError> =>
  Effect.gen(function* () {
    const marker = `t1-probe-${randomBytes(6).toString("hex")}`
    const pythonNames = requirements.filter((r) => r.kind === "python").map((r) => r.name)
    const system = requirements.filter((r) => r.kind === "system")
    const systemChecks = system.map(
      (r) =>
        `{ dpkg-query -W -f='\${Status}' ${shellQuote(r.name)} 2>/dev/null | grep -q 'ok installed' || command -v ${shellQuote(r.name)} >/dev/null 2>&1 || echo ${marker}-missing ${shellQuote(r.name)}; }`,
    )
    const script = [
      `${shellQuote(python)} -I -c ${shellQuote(PYTHON_PROBE)} ${marker} ${shellQuote(JSON.stringify(pythonNames))} 2>/dev/null`,
      ...systemChecks,
      "true",
    ].join("; ")
    const result = yield* runBookkeeping(sandbox, "looking for the tests' packages", script)
    let pytest = false
    let missingPython: ReadonlyArray<string> = pythonNames
    const missingSystem = new Set<string>()
    for (const line of result.text.split("\n")) {
      if (line.startsWith(`${marker} `)) {
        const parsed = parseProbe(line.slice(marker.length + 1))
        if (parsed !== undefined) {
          pytest = parsed.pytest
          missingPython = parsed.missing
        }
      } else if (line.startsWith(`${marker}-missing `))
        missingSystem.add(line.slice(marker.length + 9).trim())
    }
    const missing = requirements.filter((r) =>
      r.kind === "python" ? missingPython.includes(r.name) : missingSystem.has(r.name),
    )
    return { pytest, missing }
  })

const parseProbe = (
  json: string,
): { readonly pytest: boolean; readonly missing: ReadonlyArray<string> } | undefined => {
  try {
    const value: unknown = JSON.parse(json)
    if (typeof value !== "object" || value === null) return undefined
    const { pytest, missing } = value as { pytest?: unknown; missing?: unknown }
    if (typeof pytest !== "boolean" || !Array.isArray(missing)) return undefined
    return { pytest, missing: missing.filter((m): m is string => typeof m === "string") }
  } catch {
    return undefined
  }
}
