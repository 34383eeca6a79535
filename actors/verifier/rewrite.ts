/**
 * Terminal-Bench test scripts bootstrap their test runner over the network (apt-get curl, the uv
 * installer, `uvx -w pytest==… pytest …`, `uv venv` + `uv pip install`, `pip install`) and then
 * run pytest. Offline that bootstrap can only fail and the reward is a false 0. This module reads
 * such a script and, when it can do so safely, rewrites it: the bootstrap commands become `:`,
 * each pytest call becomes the sandbox's pytest with the same arguments plus a JUnit XML report,
 * and every other line stays as written, in order (copying helper files, `cd`, generating
 * inputs, unpacking private tests). What the removed commands would have installed is returned
 * as requirements for the verifier to look for in the sandbox.
 */
import { shellQuote } from "./shell.ts"
import {
  ATTACHED_REDIRECTION,
  type LogicalLine,
  logicalLines,
  REDIRECTION,
  RESERVED,
  ShellSyntaxError,
  type SimpleCommand,
  simpleCommands,
  type Token,
  type Word,
} from "./shell-words.ts"

/** A package the removed bootstrap would have installed: Python (pip, uv) or the system's (apt). */
export interface Requirement {
  readonly kind: "python" | "system"
  /** The distribution or package name, without version or extras. */
  readonly name: string
  /** As the script wrote it, e.g. `numpy==2.1.0`. */
  readonly spec: string
}

export interface RewriteInputs {
  /** Where the tests are in the sandbox ($TEST_DIR). */
  readonly testDir: string
  /** Reads a file of the tests tree (for `pip install -r requirements.txt`); undefined if absent. */
  readonly readTestFile: (path: string) => string | undefined
}

export interface RenderOptions {
  /** The interpreter whose pytest runs the tests. */
  readonly python: string
  /** Where pytest call `index` (0-based) writes its JUnit XML report. */
  readonly report: (index: number) => string
  /** The ini file the tests bring, or /dev/null, used when the call is confined to testDir. */
  readonly config: string
  /**
   * A test file of the verifier's own (its canaries) added to every call that `runsExtra` marks,
   * so that the same pytest session runs it.
   */
  readonly extraTest?: string
}

/**
 * Appended to every pytest call: a must-fail canary, or an `-x` or `--maxfail` of the task's
 * (from its addopts or the call itself, which come first), must not stop the run before the
 * task's own tests.
 */
export const NO_MAXFAIL = "--maxfail=1000000000"

export type ScriptPlan =
  | {
      readonly kind: "rewrite"
      readonly requirements: ReadonlyArray<Requirement>
      /** How many pytest calls the script makes (one report each). */
      readonly calls: number
      /**
       * Per call: it names the tests it runs (paths) and selects none of them away (`-k`, `-m`,
       * `--deselect`), so RenderOptions.extraTest is added to it and must show in its report.
       */
      readonly runsExtra: ReadonlyArray<boolean>
      /** The bootstrap commands that were removed, as written (first line of each). */
      readonly removed: ReadonlyArray<string>
      /** What the rewrite changes beyond removing the bootstrap (pins not enforced, …). */
      readonly notes: ReadonlyArray<string>
      readonly render: (options: RenderOptions) => string
    }
  | {
      readonly kind: "as-is"
      /** Why the script runs as written: nothing to rewrite, or it cannot be rewritten safely. */
      readonly reason: string
    }

/** The code that runs pytest: the workdir goes after the installed packages (see verify.ts). */
export const PYTEST_MAIN =
  'import sys; (sys.path and sys.path[0] in ("", ".")) and sys.path.append(sys.path.pop(0)); import pytest; raise SystemExit(pytest.console_main())'

/** Installed only to fetch or run the bootstrap; not something the tests use. */
const BOOTSTRAP_SYSTEM = new Set(
  ["curl", "wget", "ca-certificates", "gnupg", "gpg", "apt-transport-https"].concat([
    "python3-pip",
    "python3-venv",
    "pipx",
    "python3-pytest",
  ]),
)
/** The runner and reporters the rewrite replaces by the sandbox's pytest and t1's report. */
const RUNNER_PYTHON = new Set(
  ["pytest", "pytest-json-ctrf", "pytest-json-report", "pip", "setuptools", "wheel", "uv"].map(
    (n) => normalizeName(n),
  ),
)

/** PEP 503 normalised distribution name. */
export function normalizeName(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, "-")
}

/** The name of a requirement specifier (`numpy[extra]>=2; python_version>"3"` → numpy). */
const specName = (spec: string): string | undefined => {
  const m = /^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([=<>!~@;].*)?$/.exec(spec.trim())
  return m === null ? undefined : m[1]
}

const baseName = (word: string) => word.slice(word.lastIndexOf("/") + 1)
const isPython = (word: string) => /^python(3(\.\d+)?)?$/.test(baseName(word))
const isPytest = (word: string) => /^(pytest|py\.test)$/.test(baseName(word))
/** The tool of `uvx pytest`, `uvx pytest==8.4.1`, `uvx pytest@8.4.1`. */
const isPytestTool = (word: string) => /^(pytest|py\.test)([=<>~!@].*)?$/.test(word)
const isPip = (word: string) => /^pip(3(\.\d+)?)?$/.test(baseName(word))

class Unsafe extends Error {}

/** What one simple command is to the rewrite. */
type Role =
  | { readonly kind: "keep" }
  | {
      readonly kind: "remove"
      readonly requirements: ReadonlyArray<Requirement>
      readonly requirementFiles: ReadonlyArray<string>
      readonly notes: ReadonlyArray<string>
    }
  | {
      readonly kind: "pytest"
      /** Index of the word after `pytest` (the first argument) in the command's words. */
      readonly argsFrom: number
      readonly requirements: ReadonlyArray<Requirement>
      readonly requirementFiles: ReadonlyArray<string>
      readonly notes: ReadonlyArray<string>
      /** Run through uv or uvx: the runner itself comes over the network. */
      readonly fetched: boolean
    }

const remove = (
  requirements: ReadonlyArray<Requirement> = [],
  requirementFiles: ReadonlyArray<string> = [],
  notes: ReadonlyArray<string> = [],
): Role => ({ kind: "remove", requirements, requirementFiles, notes })

/** Reserved words and assignments that open a simple command (kept when it is rewritten). */
const leadingKept = (words: ReadonlyArray<Word>): number => {
  let i = 0
  for (const w of words) {
    if ((RESERVED.has(w.raw) && w.raw === w.text) || ASSIGNMENT.test(w.raw)) i++
    else break
  }
  return i
}

const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=/

/** Where the command's own words start: after reserved words, assignments and `sudo`/`env`. */
const commandStart = (words: ReadonlyArray<Word>): number => {
  let i = 0
  while (i < words.length) {
    const w = words[i]
    if (w === undefined) break
    if (RESERVED.has(w.raw) && w.raw === w.text) i++
    else if (ASSIGNMENT.test(w.raw)) i++
    else if (w.text === "sudo" || w.text === "env" || w.text === "command") i++
    else break
  }
  return i
}

/** The words that are arguments: redirections and their targets left out. */
const argumentsOf = (words: ReadonlyArray<Word>): Word[] => {
  const out: Word[] = []
  for (let i = 0; i < words.length; i++) {
    const w = words[i]
    if (w === undefined) continue
    if (REDIRECTION.test(w.raw)) i++
    else if (!ATTACHED_REDIRECTION.test(w.raw)) out.push(w)
  }
  return out
}

/** pip/uv options that take a value (the next word, or `=value`). */
const PIP_VALUE_OPTIONS = new Set(
  ["-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-c", "--constraint"].concat([
    "--python",
    "-p",
    "-t",
    "--target",
    "--prefix",
    "--root",
    "--trusted-host",
    "--platform",
    "--python-version",
    "--cache-dir",
    "--index",
    "--default-index",
    "--group",
    "--extra",
    "--optional",
  ]),
)

/** Packages named by an install command's arguments (after `install`/`add`). */
const packagesOf = (
  args: ReadonlyArray<Word>,
  kind: "python" | "system",
): { requirements: Requirement[]; files: string[] } => {
  const requirements: Requirement[] = []
  const files: string[] = []
  for (let i = 0; i < args.length; i++) {
    const w = args[i]?.text ?? ""
    if (w === "--") continue
    if (kind === "python" && (w === "-r" || w === "--requirement" || w === "--requirements")) {
      files.push(args[++i]?.text ?? "")
      continue
    }
    const attachedFile = /^(?:-r|--requirements?=)(.+)$/.exec(w)
    if (kind === "python" && attachedFile !== null) {
      files.push(attachedFile[1] ?? "")
      continue
    }
    if (kind === "python" && (w === "-e" || w.startsWith("--editable")))
      throw new Unsafe(`installs an editable project (${w} ${args[i + 1]?.text ?? ""})`)
    if (w.startsWith("-")) {
      if (kind === "python" && PIP_VALUE_OPTIONS.has(w)) i++
      else if (kind === "system" && (w === "-o" || w === "-t" || w === "--target-release")) i++
      continue
    }
    if (kind === "system") {
      const name = w.replace(/[=:].*$/, "")
      if (name !== "") requirements.push({ kind, name, spec: w })
      continue
    }
    const name = specName(w)
    if (name === undefined || /[/\\]/.test(w) || w.startsWith("."))
      throw new Unsafe(`installs ${JSON.stringify(w)}, which is not a package name t1 can check`)
    requirements.push({ kind, name, spec: w })
  }
  return { requirements, files }
}

/** uvx / uv tool run / uv run options, and those that take a value. */
const UV_VALUE_OPTIONS = new Set(
  ["-p", "--python", "-w", "--with", "--with-requirements", "--from", "--with-editable"].concat([
    "--project",
    "--directory",
    "--extra",
    "--group",
    "--index",
    "--index-url",
    "--extra-index-url",
    "--default-index",
    "--cache-dir",
    "--env-file",
  ]),
)
const UV_FLAGS = new Set(
  ["-q", "--quiet", "-v", "--verbose", "--isolated", "--no-cache", "--offline", "-n"].concat([
    "--refresh",
    "--no-project",
    "--active",
    "--frozen",
    "--locked",
    "--no-sync",
    "--all-extras",
    "--no-dev",
    "--no-progress",
    "--exact",
    "--no-config",
    "--managed-python",
    "--no-managed-python",
    "--system",
  ]),
)

/**
 * `uvx [options] pytest …` and `uv run [options] pytest …`: the options up to the command, what
 * they install, and where pytest's arguments start. Anything unexpected is Unsafe.
 */
const uvCall = (words: ReadonlyArray<Word>, at: number, tool: boolean): Role => {
  const requirements: Requirement[] = []
  const requirementFiles: string[] = []
  const notes: string[] = []
  let i = at
  while (i < words.length) {
    const raw = words[i]?.text ?? ""
    if (!raw.startsWith("-")) break
    const eq = raw.indexOf("=")
    const name = raw.startsWith("--") && eq > 0 ? raw.slice(0, eq) : raw
    const attached = raw.startsWith("--") && eq > 0 ? raw.slice(eq + 1) : undefined
    if (UV_FLAGS.has(name)) {
      i++
      continue
    }
    if (!UV_VALUE_OPTIONS.has(name)) throw new Unsafe(`uses a uv option t1 does not know: ${raw}`)
    const value = attached ?? words[i + 1]?.text ?? ""
    i += attached === undefined ? 2 : 1
    if (name === "-w" || name === "--with") {
      for (const spec of value.split(",")) {
        const pkg = specName(spec)
        if (pkg === undefined) throw new Unsafe(`uv --with ${JSON.stringify(spec)}`)
        requirements.push({ kind: "python", name: pkg, spec })
      }
    } else if (name === "--with-requirements") requirementFiles.push(value)
    else if (name === "--with-editable")
      throw new Unsafe(`installs an editable project (--with-editable ${value})`)
    else if (name === "--from" && !isPytestTool(value))
      throw new Unsafe(`runs pytest from ${JSON.stringify(value)}`)
    else if (name === "-p" || name === "--python")
      notes.push(`it asks for Python ${value}; the sandbox's interpreter ran the tests`)
  }
  const command = words[i]?.text ?? ""
  if (tool ? isPytestTool(command) : isPytest(command)) {
    if (tool && command !== "pytest" && command !== "py.test")
      requirements.push({ kind: "python", name: "pytest", spec: command.replace("@", "==") })
    return { kind: "pytest", argsFrom: i + 1, requirements, requirementFiles, notes, fetched: true }
  }
  if (!tool && isPython(command) && words[i + 1]?.text === "-m" && words[i + 2]?.text === "pytest")
    return { kind: "pytest", argsFrom: i + 3, requirements, requirementFiles, notes, fetched: true }
  if (tool) throw new Unsafe(`uvx runs ${JSON.stringify(command)}, not pytest`)
  // `uv run something-else`: a command of the test itself, in uv's environment.
  throw new Unsafe(`uv run runs ${JSON.stringify(command)}, which needs uv's environment`)
}

const PACKAGE_MANAGERS: ReadonlyArray<readonly [string, ReadonlySet<string>]> = [
  ["apt-get", new Set(["install"])],
  ["apt", new Set(["install"])],
  ["aptitude", new Set(["install"])],
  ["apk", new Set(["add"])],
  ["yum", new Set(["install"])],
  ["dnf", new Set(["install"])],
  ["microdnf", new Set(["install"])],
]

/** What one simple command is. `words` are the command's words from its command word on. */
const roleOf = (words: ReadonlyArray<Word>): Role => {
  const args = argumentsOf(words)
  const w = (i: number) => args[i]?.text ?? ""
  const first = w(0)
  if (words.some((word) => word.dynamic && /\b(pytest|py\.test)\b/.test(word.text)))
    throw new Unsafe("runs pytest inside a command substitution")
  if (isPytest(first))
    return {
      kind: "pytest",
      argsFrom: 1,
      requirements: [],
      requirementFiles: [],
      notes: [],
      fetched: false,
    }
  if (isPython(first) && w(1) === "-m" && w(2) === "pytest")
    return {
      kind: "pytest",
      argsFrom: 3,
      requirements: [],
      requirementFiles: [],
      notes: [],
      fetched: false,
    }
  if (first === "uvx") return uvCall(args, 1, true)
  if (first === "uv" && w(1) === "tool" && w(2) === "run") return uvCall(args, 3, true)
  if (first === "uv" && w(1) === "run") return uvCall(args, 2, false)

  const manager = PACKAGE_MANAGERS.find(([name]) => name === first)
  if (manager !== undefined) {
    const sub = args.slice(1).findIndex((a) => !a.text.startsWith("-"))
    const verb = sub < 0 ? "" : w(sub + 1)
    if (manager[1].has(verb)) {
      const found = packagesOf(args.slice(sub + 2), "system")
      return remove(found.requirements)
    }
    return remove()
  }
  const pipInstall =
    (isPip(first) && w(1) === "install") ||
    (isPython(first) && w(1) === "-m" && w(2) === "pip" && w(3) === "install") ||
    (first === "uv" && w(1) === "pip" && (w(2) === "install" || w(2) === "sync")) ||
    (first === "uv" && w(1) === "add") ||
    (first === "uv" && w(1) === "tool" && w(2) === "install") ||
    (first === "pipx" && w(1) === "install")
  if (pipInstall) {
    const from = isPip(first) || first === "uv" || first === "pipx" ? 2 : 4
    const skip = first === "uv" && (w(1) === "pip" || w(1) === "tool") ? 3 : from
    const syncing = first === "uv" && w(2) === "sync"
    const found = packagesOf(args.slice(skip), "python")
    return syncing
      ? remove([], [...found.requirements.map((r) => r.spec), ...found.files])
      : remove(found.requirements, found.files)
  }
  if (first === "uv" && ["venv", "init", "lock"].includes(w(1))) return remove()
  if (first === "uv" && w(1) === "python") return remove()
  if (first === "uv" && w(1) === "sync")
    throw new Unsafe("runs `uv sync`, whose packages come from a project file t1 does not read")
  if (isPython(first) && w(1) === "-m" && (w(2) === "venv" || w(2) === "virtualenv"))
    return remove()
  if (first === "virtualenv") return remove()
  if (
    (first === "source" || first === ".") &&
    /(\.local\/bin\/env|\/bin\/activate|\.cargo\/env)$/.test(w(1))
  )
    return remove()
  if (
    ["npm", "pnpm", "yarn", "bun"].includes(first) &&
    ["install", "i", "ci", "add"].includes(w(1))
  )
    throw new Unsafe(`installs ${first} packages, which t1 cannot look for in the sandbox`)
  if (
    ["bash", "sh", "eval"].includes(first) &&
    args.some((a) => /\b(pytest|py\.test)\b/.test(a.text))
  )
    throw new Unsafe(`runs pytest through ${first} with a string t1 does not parse`)
  return { kind: "keep" }
}

/** A network fetch by curl or wget of something not on this machine. */
const fetchesRemote = (words: ReadonlyArray<Word>): boolean => {
  const first = words[0]?.text ?? ""
  if (first !== "curl" && first !== "wget") return false
  return words.some(
    (w) =>
      /^https?:\/\//.test(w.text) &&
      !/^https?:\/\/(localhost|127\.\d+\.\d+\.\d+|\[::1\])([:/]|$)/.test(w.text),
  )
}

/** pytest options whose report t1's own JUnit report replaces (the plugins may be absent). */
const REPORT_OPTIONS_WITH_VALUE = new Set([
  "--ctrf",
  "--json-report-file",
  "--junitxml",
  "--junit-xml",
])
const REPORT_OPTIONS =
  /^--(ctrf|json-report-file|junitxml|junit-xml)=|^--json-report(-[a-z-]+)?(=|$)/

interface Planned {
  readonly line: LogicalLine
  /** Per simple command of the line: its role and where its own words start. */
  readonly commands: ReadonlyArray<{
    readonly command: SimpleCommand
    readonly start: number
    readonly role: Role
  }>
}

/** Pipelines of the line: runs of commands joined by `|` or `|&`. */
const pipelines = (
  line: LogicalLine,
  commands: ReadonlyArray<SimpleCommand>,
): SimpleCommand[][] => {
  const out: SimpleCommand[][] = []
  let current: SimpleCommand[] = []
  for (const command of commands) {
    current.push(command)
    const after = line.tokens[command.to]
    if (!(after?.kind === "op" && (after.raw === "|" || after.raw === "|&"))) {
      out.push(current)
      current = []
    }
  }
  if (current.length > 0) out.push(current)
  return out
}

const planLine = (line: LogicalLine): Planned => {
  const commands = simpleCommands(line)
  const roles = new Map<SimpleCommand, Role>()
  for (const pipeline of pipelines(line, commands)) {
    const own = pipeline.map((c) => c.words.slice(commandStart(c.words)))
    // `curl -LsSf https://…/install.sh | sh`: an installer fetched and run.
    const installer =
      pipeline.length > 1 &&
      own.some(fetchesRemote) &&
      ["sh", "bash"].includes(own.at(-1)?.[0]?.text ?? "")
    pipeline.forEach((command, i) => {
      roles.set(command, installer ? remove() : roleOf(own[i] ?? []))
    })
  }
  const planned = commands.map((command) => ({
    command,
    start: commandStart(command.words),
    role: roles.get(command) ?? ({ kind: "keep" } as Role),
  }))
  if (line.heredoc && planned.some((p) => p.role.kind !== "keep"))
    throw new Unsafe("feeds a here-document to a command t1 would change")
  return { line, commands: planned }
}

/** The first line of a command line as written, for notes. */
const shown = (tokens: ReadonlyArray<Token>) => {
  const text = tokens.map((t) => t.raw).join(" ")
  const firstLine = text.split("\n")[0] ?? ""
  return firstLine.length > 120 ? `${firstLine.slice(0, 117)}…` : firstLine
}

/** Requirements named in a requirements file (`-r`); comments, options and blank lines skipped. */
const requirementsFile = (text: string, file: string): Requirement[] =>
  text.split(/\r?\n/).flatMap((raw) => {
    const line = raw.replace(/(^|\s)#.*$/, "").trim()
    if (line === "") return []
    if (line.startsWith("-")) {
      if (/^(-r|--requirement|-c|--constraint|-e|--editable)\b/.test(line))
        throw new Unsafe(`${file} includes ${JSON.stringify(line)}`)
      return []
    }
    const name = specName(line)
    if (name === undefined)
      throw new Unsafe(`${file} has a line t1 cannot read: ${JSON.stringify(line)}`)
    return [{ kind: "python" as const, name, spec: line }]
  })

/** `$TEST_DIR/x`, `${TEST_DIR}/x` and the literal test directory, as a path in the sandbox. */
const resolveTestPath = (word: string, testDir: string): string =>
  word.replace(/^\$\{?TEST_DIR\}?/, testDir)

/**
 * Reads the script and decides: rewrite (with what to look for in the sandbox and a renderer)
 * or run as written (with the reason). Never guesses: what it cannot read makes it "as-is".
 */
export const planTestScript = (script: string, inputs: RewriteInputs): ScriptPlan => {
  let lines: ReadonlyArray<LogicalLine>
  try {
    lines = logicalLines(script)
  } catch (error) {
    if (error instanceof ShellSyntaxError)
      return {
        kind: "as-is",
        reason: `t1 cannot parse it (${error.message}), so it ran as written`,
      }
    throw error
  }
  let planned: Planned[]
  try {
    planned = lines.map(planLine)
  } catch (error) {
    if (error instanceof Unsafe)
      return {
        kind: "as-is",
        reason: `t1 cannot rewrite it safely: it ${error.message}; it ran as written`,
      }
    throw error
  }
  const all = planned.flatMap((p) => p.commands)
  const calls = all.filter((c) => c.role.kind === "pytest")
  const removedCommands = all.filter((c) => c.role.kind === "remove")
  const removedLines = planned.filter((p) => p.commands.some((c) => c.role.kind === "remove"))
  const fetches =
    removedCommands.length > 0 || calls.some((c) => c.role.kind === "pytest" && c.role.fetched)
  if (!fetches)
    return { kind: "as-is", reason: "it installs nothing over the network, so it ran as written" }
  if (calls.length === 0)
    return {
      kind: "as-is",
      reason:
        "it installs over the network but t1 found no pytest call in it to point at the sandbox's pytest, so it ran as written",
    }

  const requirements: Requirement[] = []
  const notes: string[] = []
  try {
    for (const { role } of all) {
      if (role.kind === "keep") continue
      requirements.push(...role.requirements)
      notes.push(...role.notes)
      for (const file of role.requirementFiles) {
        const path = resolveTestPath(file, inputs.testDir)
        const inside = path.startsWith(`${inputs.testDir}/`)
          ? path.slice(inputs.testDir.length + 1)
          : path
        const text = inputs.readTestFile(inside)
        if (text === undefined)
          throw new Unsafe(`installs from ${file}, which is not among the test files`)
        requirements.push(...requirementsFile(text, file))
      }
    }
  } catch (error) {
    if (error instanceof Unsafe)
      return {
        kind: "as-is",
        reason: `t1 cannot rewrite it safely: it ${error.message}; it ran as written`,
      }
    throw error
  }
  // A system package the bootstrap installs that a kept command runs is one the tests need.
  const keptCommands = new Set(
    all
      .filter((c) => c.role.kind === "keep")
      .map((c) => argumentsOf(c.command.words.slice(c.start))[0]?.text ?? ""),
  )
  const needed = dedupe(
    requirements.filter((r) =>
      r.kind === "python"
        ? !RUNNER_PYTHON.has(normalizeName(r.name))
        : !BOOTSTRAP_SYSTEM.has(r.name) || keptCommands.has(r.name),
    ),
  )
  const pins = requirements.filter((r) => r.kind === "python" && /[=<>~]/.test(r.spec))
  if (pins.length > 0)
    notes.push(
      `version pins are not enforced (${dedupeText(pins.map((p) => p.spec)).join(", ")}); the sandbox's versions ran`,
    )

  return {
    kind: "rewrite",
    requirements: needed,
    calls: calls.length,
    runsExtra: calls.map((c) => takesExtraTest(callArguments(c.command, c.start, c.role))),
    removed: removedLines.map((p) => shown(p.line.tokens)),
    notes: dedupeText(notes),
    render: (options) => render(script, planned, inputs.testDir, options),
  }
}

const dedupe = (requirements: ReadonlyArray<Requirement>): Requirement[] => {
  const seen = new Map<string, Requirement>()
  for (const r of requirements) {
    const key = `${r.kind}:${r.kind === "python" ? normalizeName(r.name) : r.name}`
    if (!seen.has(key)) seen.set(key, r)
  }
  return [...seen.values()]
}
const dedupeText = (texts: ReadonlyArray<string>) => [...new Set(texts)]

/** The pytest call's arguments with the report options removed, as written. */
const keptArguments = (words: ReadonlyArray<Word>): Word[] => {
  const out: Word[] = []
  for (let i = 0; i < words.length; i++) {
    const w = words[i]
    if (w === undefined) continue
    if (REPORT_OPTIONS_WITH_VALUE.has(w.text) && !REDIRECTION.test(w.raw)) {
      i++
      continue
    }
    if (REPORT_OPTIONS.test(w.text)) continue
    out.push(w)
  }
  return out
}

/**
 * Confines pytest to the test directory (its conftest.py and ini files only, never ones the
 * agent left above it) when every test path the call names lies there; a call naming tests
 * elsewhere keeps pytest's own discovery.
 */
const confinement = (args: ReadonlyArray<Word>, testDir: string, config: string): string[] => {
  const paths = testPaths(args)
  const inside = (t: string) => {
    const p = resolveTestPath(t, testDir)
    return p === testDir || p.startsWith(`${testDir}/`)
  }
  if (paths.length === 0 || !paths.every(inside)) return []
  if (args.some((w) => /^(-c|--config-file|--rootdir|--confcutdir)(=|$)/.test(w.text))) return []
  const q = shellQuote
  return [`--rootdir=${q(testDir)}`, `--confcutdir=${q(testDir)}`, `-c ${q(config)}`]
}

/** A pytest call's arguments as written, from its first, without the report options. */
const callArguments = (command: SimpleCommand, start: number, role: Role): Word[] => {
  const own = command.words.slice(start)
  return role.kind === "pytest" ? keptArguments(own.slice(argumentsIndex(own, role.argsFrom))) : []
}

/** Options by which a pytest call leaves tests out that it collects. */
const SELECTING = /^(-k|-m|--deselect|--lf|--last-failed|--sw|--stepwise)(=|$)|^-[km]./

/**
 * Whether a call can take one more test file: it names its test paths (one more path does not
 * replace the discovery a call without paths does) and selects none of its tests away.
 */
const takesExtraTest = (args: ReadonlyArray<Word>): boolean =>
  testPaths(args).length > 0 && !args.some((w) => SELECTING.test(w.text))

/** The arguments that name tests: files, node ids, and paths (in the test directory or not). */
const testPaths = (args: ReadonlyArray<Word>): string[] =>
  argumentsOf(args)
    .map((w) => w.text)
    .filter((t) => !t.startsWith("-") && (/\.py(::|$)/.test(t) || /TEST_DIR|\//.test(t)))

const render = (
  script: string,
  planned: ReadonlyArray<Planned>,
  testDir: string,
  options: RenderOptions,
): string => {
  const s = script.replace(/\r\n/g, "\n")
  let out = ""
  let at = 0
  let call = 0
  for (const { line, commands } of planned) {
    if (commands.every((c) => c.role.kind === "keep")) continue
    out += s.slice(at, line.start)
    // Each changed command's own words are replaced; the reserved words and assignments before
    // them stay (`if uvx … pytest …; then` keeps its `if`, `X=1 pytest` its X=1).
    const replaced = new Map<number, string>()
    const skipped = new Set<number>()
    for (const { command, start, role } of commands) {
      if (role.kind === "keep") continue
      const first = command.from + leadingKept(command.words)
      for (let i = first; i < command.to; i++) skipped.add(i)
      if (role.kind === "remove") {
        replaced.set(first, ":")
        continue
      }
      const args = callArguments(command, start, role)
      const extra =
        options.extraTest !== undefined && takesExtraTest(args)
          ? [shellQuote(options.extraTest)]
          : []
      const pieces = [
        shellQuote(options.python),
        `-c ${shellQuote(PYTEST_MAIN)}`,
        ...args.map((w) => w.raw),
        ...extra,
        `-p no:cacheprovider --continue-on-collection-errors ${NO_MAXFAIL}`,
        `--junitxml=${shellQuote(options.report(call++))} -o junit_family=xunit1`,
        ...confinement(args, testDir, options.config),
      ]
      replaced.set(first, pieces.join(" "))
    }
    const words = line.tokens.flatMap((t, i) => {
      const r = replaced.get(i)
      if (r !== undefined) return [r]
      return skipped.has(i) ? [] : [t.raw]
    })
    out += `${words.join(" ")}\n`
    at = line.end
  }
  return out + s.slice(at)
}

/**
 * `argsFrom` counts arguments (redirections left out); this is the same place among the words
 * as written, so that redirections after pytest's arguments stay where they were.
 */
const argumentsIndex = (words: ReadonlyArray<Word>, argsFrom: number): number => {
  let seen = 0
  for (let i = 0; i < words.length; i++) {
    const w = words[i]
    if (w === undefined) break
    if (REDIRECTION.test(w.raw)) {
      i++
      continue
    }
    if (ATTACHED_REDIRECTION.test(w.raw)) continue
    if (seen === argsFrom) return i
    seen++
  }
  return words.length
}
