import { posix } from "node:path"

/**
 * Terminal-Bench test scripts usually bootstrap their test runner over the network (apt-get
 * curl, the uv installer, `uvx -w pytest==… pytest …`) and then run pytest. In a sandbox without
 * network that script can only fail, so the verifier runs its pytest files directly instead.
 */

/** Lines that fetch or install something over the network. */
const NETWORK = [
  /\b(curl|wget)\b[^\n]*\bhttps?:\/\//,
  /\b(pip3?|python3? -m pip|uv pip)\s+install\b/,
  /\bapt(-get)?\s+(-\S+\s+)*(update|install)\b/,
  /\b(apk\s+add|yum\s+install|dnf\s+install)\b/,
  /\buvx\b/,
  /\buv\s+(add|sync|tool\s+install|run\s+(-\S+\s+)*--with)\b/,
  /\b(npm|pnpm|yarn)\s+(install|add|ci)\b/,
  /\b(poetry|conda|mamba)\s+install\b/,
]

/** A pytest invocation: `pytest …`, `python -m pytest …`, `uvx … pytest …`, `uv run pytest …`. */
const PYTEST = /(^|[\s;&|(`])(pytest|py\.test)(\s|$)|-m\s+pytest\b/

/** The script's logical lines: comments dropped, backslash continuations joined. */
const logicalLines = (script: string): string[] =>
  script
    .replace(/\\\r?\n/g, " ")
    .split(/\r?\n/)
    .map((line) => line.replace(/(^|\s)#.*$/, "").trim())
    .filter((line) => line !== "")

/**
 * The commands of the script that run pytest. `pip install pytest` names pytest without running
 * it: a command's words from `install`/`add` on are packages, not an invocation.
 */
const pytestCommands = (lines: ReadonlyArray<string>): string[] =>
  lines
    .flatMap((line) => line.split(/&&|\|\||;/))
    .map((command) => command.replace(/\b(install|add)\b.*$/, ""))
    .filter((command) => PYTEST.test(command))

/** True when the script fetches or installs over the network and runs pytest. */
export const bootstrapsPytestOverNetwork = (script: string): boolean => {
  const lines = logicalLines(script)
  return (
    lines.some((line) => NETWORK.some((pattern) => pattern.test(line))) &&
    pytestCommands(lines).length > 0
  )
}

/**
 * The test files the script's pytest invocations name, as paths inside the sandbox, when they
 * are files of the tests tree (`$TEST_DIR/test_outputs.py`, `/tests/test_outputs.py`); empty
 * when it names none, and then the whole test directory is run.
 */
export const pytestTargets = (
  script: string,
  testDir: string,
  files: ReadonlySet<string>,
): ReadonlyArray<string> => {
  const targets = new Set<string>()
  for (const command of pytestCommands(logicalLines(script))) {
    for (const word of command.split(/\s+/)) {
      const path = word
        .replace(/^["']|["']$/g, "")
        .replace(/\$\{?TEST_DIR\}?/g, testDir)
        .replace(/::.*$/, "")
      if (!path.endsWith(".py")) continue
      const inside = path.startsWith(`${testDir}/`)
        ? path.slice(testDir.length + 1)
        : posix.isAbsolute(path)
          ? undefined
          : path.replace(/^\.\//, "")
      if (inside === undefined) continue
      const candidates = [inside, inside.replace(/^tests\//, ""), posix.basename(inside)]
      const found = candidates.find((c) => files.has(c))
      if (found !== undefined) targets.add(`${testDir}/${found}`)
    }
  }
  return [...targets]
}
