import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, Logger, References } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import type { Task } from "../task.ts"
import {
  type LoadTaskOptions,
  loadTask,
  loadTasks,
  loadTasksSettled,
  TaskLoadError,
  TaskLoadErrors,
} from "./index.ts"
import { dockerfileWorkdir } from "./layout.ts"
import { invalidUtf8Offset } from "./text.ts"

const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), "..", "fixtures")
const fixture = (path: string) => join(FIXTURES, path)

const scratch = mkdtempSync(join(tmpdir(), "t1-task-load-"))
const cacheDir = join(scratch, "cache")
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** Runs a loader effect, keeping the warnings it logs instead of printing them. */
const run = async <A, E>(effect: Effect.Effect<A, E>) => {
  const warnings: string[] = []
  const capture = Logger.make(({ message, logLevel }) => {
    if (logLevel === "Warn")
      warnings.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
  })
  const exit = await Effect.runPromiseExit(
    effect.pipe(
      Effect.provide(Logger.layer([capture])),
      Effect.provideService(References.MinimumLogLevel, "Warn"),
    ),
  )
  return { exit, warnings }
}

const load = async (dir: string, options: LoadTaskOptions = {}): Promise<Task> => {
  const { exit } = await run(loadTask(dir, { cacheDir, ...options }))
  if (exit._tag === "Success") return exit.value
  throw new Error(`expected ${dir} to load: ${String(exit.cause)}`)
}

const loadError = async (dir: string, options: LoadTaskOptions = {}): Promise<TaskLoadError> => {
  const { exit } = await run(Effect.flip(loadTask(dir, { cacheDir, ...options })))
  if (exit._tag === "Success") return exit.value
  throw new Error(`expected ${dir} to fail to load, but: ${String(exit.cause)}`)
}

let copies = 0
/**
 * A copy of a fixture under the scratch directory with some files replaced (a string or bytes)
 * or removed (null): how the malformed variants are made.
 */
const variant = (
  from: string,
  edits: Readonly<Record<string, string | Uint8Array | null>> = {},
  name = `${from.split("/").at(-1)}-${++copies}`,
): string => {
  const dir = join(scratch, "variants", String(copies), name)
  cpSync(fixture(from), dir, { recursive: true })
  for (const [path, body] of Object.entries(edits)) {
    const target = join(dir, path)
    if (body === null) rmSync(target, { recursive: true, force: true })
    else {
      mkdirSync(dirname(target), { recursive: true })
      writeFileSync(target, body)
    }
  }
  return dir
}

const edit = (from: string, path: string, change: (text: string) => string): string =>
  change(readFileSync(fixture(join(from, path)), "utf8"))

describe("loading each format", () => {
  it("loads a Terminal-Bench 2 task (schema 1.1) with its limits, tests and solution", async () => {
    const dir = fixture("tb2/csv-column-sum")
    const task = await load(dir)
    expect(task).toMatchObject({
      id: "csv-column-sum",
      taskSet: "tb2",
      format: "tb2",
      dir,
      difficulty: "easy",
      tags: ["csv", "python"],
      family: "",
      split: "unspecified",
      agentTimeoutSec: 900,
      environment: {
        dockerImage: "ghcr.io/t1-fixtures/csv-column-sum:20250101",
        buildContext: join(dir, "environment"),
        dockerfile: "Dockerfile",
        cpus: 2,
        memoryMb: 4096,
        storageMb: 8192,
        allowInternet: false,
        workdir: "/app",
        setupScript: undefined,
      },
      verifier: {
        testsDir: join(dir, "tests"),
        testDir: "/tests",
        kind: "script",
        script: "test.sh",
        scriptPath: join(dir, "tests", "test.sh"),
        parser: undefined,
        timeoutSec: 120,
        expectedTests: 2,
      },
      solution: join(dir, "solution", "solve.sh"),
    })
    expect(task.instruction).toBe(readFileSync(join(dir, "instruction.md"), "utf8"))
  })

  it("loads a schema 1.0 task: sizes as strings, Harbor's defaults, WORKDIR from the Dockerfile", async () => {
    const task = await load(fixture("tb2/listen-port-legacy"))
    expect(task.environment).toMatchObject({
      dockerImage: "ghcr.io/t1-fixtures/listen-port-legacy:20240901",
      cpus: 1,
      memoryMb: 2048,
      storageMb: 10240,
      allowInternet: true,
      workdir: "/srv/site",
    })
    expect(task.agentTimeoutSec).toBe(1200)
    expect(task.verifier.timeoutSec).toBe(300)
    // Two functions and one method: class-based tests count too.
    expect(task.verifier.expectedTests).toBe(3)
  })

  it("fills in what a minimal task.toml leaves out", async () => {
    const dir = variant("tb2/csv-column-sum", { "task.toml": "", "solution/solve.sh": null })
    const task = await load(dir)
    expect(task).toMatchObject({
      difficulty: "unknown",
      tags: [],
      agentTimeoutSec: 0,
      environment: { dockerImage: "", cpus: 1, memoryMb: 2048, storageMb: 10240, workdir: "/app" },
      verifier: { timeoutSec: 600 },
      solution: undefined,
    })
    expect(task.environment.allowInternet).toBe(true)
  })

  it("reads Harbor's schema_version spelling, [task] keywords and network_mode", async () => {
    const dir = variant("tb2/csv-column-sum", {
      "task.toml": [
        'schema_version = "1.1"',
        "[task]",
        'name = "t1/csv-column-sum"',
        'keywords = ["csv", "sums"]',
        "[metadata]",
        'tags = ["csv"]',
        "[environment]",
        'network_mode = "no-network"',
        "memory_mb = 1024",
      ].join("\n"),
    })
    const task = await load(dir)
    expect(task.tags).toEqual(["csv", "sums"])
    expect(task.environment).toMatchObject({ allowInternet: false, memoryMb: 1024 })
  })

  it("warns about Harbor settings t1 cannot honour instead of dropping them silently", async () => {
    const dir = variant("tb2/csv-column-sum", {
      "task.toml": '[environment]\ngpus = 1\n[verifier.env]\nTOKEN = "x"\n',
    })
    const { exit, warnings } = await run(loadTask(dir, { cacheDir }))
    expect(exit._tag).toBe("Success")
    expect(warnings.join("\n")).toContain("[environment].gpus = 1")
    expect(warnings.join("\n")).toContain("[verifier].env")
  })

  it("loads a Terminal-Bench 1 task: inline instruction, compose build, run-tests.sh beside the tests", async () => {
    const dir = fixture("tb1/word-count")
    const task = await load(dir)
    expect(task).toMatchObject({
      id: "word-count",
      taskSet: "tb1",
      format: "tb1",
      difficulty: "easy",
      tags: ["file-operations", "text-processing"],
      split: "unspecified",
      agentTimeoutSec: 600,
      environment: {
        // The compose image is ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}: nothing prebuilt.
        dockerImage: "",
        buildContext: dir,
        dockerfile: "Dockerfile",
        cpus: 1,
        memoryMb: 2048,
        allowInternet: true,
        workdir: "/app",
      },
      verifier: {
        testsDir: join(dir, "tests"),
        testDir: "/tests",
        kind: "script",
        script: "run-tests.sh",
        scriptPath: join(dir, "run-tests.sh"),
        parser: "pytest",
        timeoutSec: 90,
        expectedTests: 2,
      },
      solution: join(dir, "solution.sh"),
    })
    expect(task.instruction).toMatch(/^The directory \/app\/notes holds plain-text notes/)
    expect(task.instruction.endsWith("/app/word_count.txt.")).toBe(true)
  })

  it("loads a Terminal-Bench 1 task with descriptions, compose limits and TB1's defaults", async () => {
    const task = await load(fixture("tb1/fix-permissions"))
    expect(task.instruction).toMatch(/^A script at \/app\/process_data.sh should produce/)
    expect(task).toMatchObject({
      agentTimeoutSec: 180,
      environment: { allowInternet: false, cpus: 0.5, memoryMb: 512 },
      verifier: { parser: "pytest", timeoutSec: 60 },
    })
  })

  it("reads compose limits, leaving the variables Terminal-Bench fills in to the defaults", async () => {
    const compose = (limits: string) =>
      variant("tb1/word-count", {
        "docker-compose.yaml": [
          "services:",
          "  client:",
          "    build: .",
          // biome-ignore lint/suspicious/noTemplateCurlyInString: Compose's variable syntax
          "    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}",
          "    working_dir: /app/notes",
          "    deploy:",
          "      resources:",
          "        limits:",
          limits,
          "  db:",
          "    image: postgres:16",
        ].join("\n"),
      })
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Compose's variable syntax
    const variables = '          cpus: "${CPUS}"\n          memory: ${MEMORY}'
    const { exit, warnings } = await run(loadTask(compose(variables), { cacheDir }))
    if (exit._tag !== "Success") throw new Error(String(exit.cause))
    expect(exit.value.environment).toMatchObject({ cpus: 1, memoryMb: 2048, workdir: "/app/notes" })
    expect(warnings.join("\n")).toContain(
      'services db are ignored: a t1 sandbox runs the "client" service alone',
    )
    const literal = await load(compose('          cpus: "1.5"\n          memory: 1g'))
    expect(literal.environment).toMatchObject({ cpus: 1.5, memoryMb: 1024, dockerImage: "" })
  })

  it("turns solution.yaml keystrokes into a bash script in the cache", async () => {
    const task = await load(fixture("tb1/fix-permissions"))
    expect(task.solution).toMatch(
      new RegExp(`^${cacheDir}/solutions/fix-permissions-[0-9a-f]{16}\\.sh$`),
    )
    const script = readFileSync(task.solution ?? "", "utf8")
    expect(script.startsWith("#!/bin/bash\n")).toBe(true)
    expect(script.split("\n").filter((l) => l !== "" && !l.startsWith("#"))).toEqual([
      "ls -l /app/process_data.sh",
      "chmod +x /app/process_data.sh",
      // An entry without append_enter runs on into the next one, as typed keys do.
      "/app/process_data.sh && cat /app/processed.txt",
      "sleep 0.5",
    ])
    // Loading again reuses the same file.
    expect((await load(fixture("tb1/fix-permissions"))).solution).toBe(task.solution)
  })

  it("leaves out a keystroke solution that needs tmux keys, with a warning", async () => {
    const dir = variant("tb1/fix-permissions", {
      "solution.yaml":
        "- command: vim /app/process_data.sh\n  append_enter: true\n- command: Escape\n",
    })
    const { exit, warnings } = await run(loadTask(dir, { cacheDir }))
    expect(exit._tag === "Success" ? exit.value.solution : "failed").toBeUndefined()
    expect(warnings).toEqual([
      `${join(dir, "solution.yaml")}: no reference solution: entry 1 sends the key Escape, which a bash script cannot type`,
    ])
  })

  it("loads a native task with every field of task.json", async () => {
    const dir = fixture("native/grep-errors")
    expect(await load(dir)).toMatchObject({
      id: "grep-errors",
      taskSet: "fixtures-native",
      format: "native",
      family: "text-grep",
      difficulty: "easy",
      split: "train",
      tags: ["grep", "logs"],
      agentTimeoutSec: 300,
      environment: {
        dockerImage: "t1-base:latest",
        buildContext: undefined,
        cpus: 1,
        memoryMb: 512,
        allowInternet: false,
        workdir: "/app",
        setupScript: join(dir, "setup.sh"),
      },
      verifier: { kind: "pytest", testDir: "/tests", timeoutSec: 30, expectedTests: 2 },
      solution: join(dir, "solution", "solve.sh"),
    })
  })

  it("verifies a native task with tests/test.sh by that script (NATIVE.md)", async () => {
    const dir = variant("native/grep-errors", {
      "tests/test.sh":
        '#!/bin/bash\necho \'{"results":{"tests":[]}}\' > /logs/verifier/ctrf.json\n',
    })
    expect((await load(dir)).verifier).toMatchObject({
      kind: "script",
      script: "test.sh",
      scriptPath: join(dir, "tests", "test.sh"),
      testDir: "/tests",
      testsDir: join(dir, "tests"),
    })
    // Without it, pytest runs the test files.
    expect((await load(fixture("native/grep-errors"))).verifier).toMatchObject({
      kind: "pytest",
      script: undefined,
    })
  })

  it("gives a native task its defaults from the directory names and NATIVE.md", async () => {
    const dir = variant("native/grep-errors", { "task.json": '{"split": "eval"}' }, "renamed")
    expect(await load(dir)).toMatchObject({
      id: "renamed",
      taskSet: String(copies),
      family: "",
      difficulty: "medium",
      split: "eval",
      tags: [],
      agentTimeoutSec: 600,
      environment: { dockerImage: "t1-base:latest", cpus: 1, memoryMb: 1024, workdir: "/app" },
      verifier: { timeoutSec: 60, expectedTests: 0 },
    })
  })

  it("applies the caller's task set and split where the files say none", async () => {
    const task = await load(fixture("tb1/word-count"), {
      taskSet: "terminal-bench-1",
      split: "eval",
    })
    expect(task).toMatchObject({ taskSet: "terminal-bench-1", split: "eval" })
    const native = await load(fixture("native/grep-errors"), { taskSet: "other", split: "train" })
    expect(native.taskSet).toBe("fixtures-native")
  })

  it("refuses to relabel a native task's split", async () => {
    const error = await loadError(fixture("native/grep-errors"), { split: "eval" })
    expect(error.message).toBe(
      `${fixture("native/grep-errors/task.json")}: split: expected "eval", the split this task was loaded as, got "train"`,
    )
  })
})

describe("loading many tasks", () => {
  it("finds every task below a directory, in directory order", async () => {
    const { exit } = await run(loadTasks([FIXTURES], { cacheDir }))
    const tasks = exit._tag === "Success" ? exit.value : []
    expect(tasks.map((t) => `${t.format}:${t.id}`)).toEqual([
      "native:grep-errors",
      "tb2:config-sections",
      "tb2:greetings",
      "tb2:region-totals",
      "tb1:tb1-port-config",
      "tb1:tb1-sorted-names",
      "tb1:fix-permissions",
      "tb1:word-count",
      "tb2:csv-column-sum",
      "tb2:listen-port-legacy",
      "tb2:matrix-trace",
    ])
  })

  it("reports every broken task, the good ones still loading", async () => {
    const root = join(scratch, "mixed")
    cpSync(fixture("tb2/csv-column-sum"), join(root, "good"), { recursive: true })
    cpSync(fixture("tb2/csv-column-sum"), join(root, "bad-timeout"), { recursive: true })
    writeFileSync(join(root, "bad-timeout", "task.toml"), '[agent]\ntimeout_sec = "soon"\n')
    cpSync(fixture("tb1/word-count"), join(root, "no-config"), { recursive: true })
    rmSync(join(root, "no-config", "task.yaml"))
    mkdirSync(join(root, "empty-dir"))

    const { exit } = await run(loadTasksSettled([root, join(scratch, "nowhere")], { cacheDir }))
    if (exit._tag !== "Success") throw new Error(String(exit.cause))
    expect(exit.value.tasks.map((t) => t.id)).toEqual(["good"])
    expect(exit.value.failures.map((f) => f.message)).toEqual([
      `${join(root, "bad-timeout", "task.toml")}: [agent].timeout_sec: expected a positive number, got "soon"`,
      `${join(root, "no-config")}: expected a task directory with task.toml (Terminal-Bench 2), task.yaml (Terminal-Bench 1) or task.json (t1 native), got none of them`,
      `${join(scratch, "nowhere")}: expected a task directory, got nothing (it does not exist)`,
    ])

    const strict = await run(Effect.flip(loadTasks([root], { cacheDir })))
    if (strict.exit._tag !== "Success") throw new Error("expected loadTasks to fail")
    expect(strict.exit.value).toBeInstanceOf(TaskLoadErrors)
    expect(strict.exit.value.message.split("\n")).toEqual([
      "2 tasks failed to load:",
      `  ${join(root, "bad-timeout", "task.toml")}: [agent].timeout_sec: expected a positive number, got "soon"`,
      `  ${join(root, "no-config")}: expected a task directory with task.toml (Terminal-Bench 2), task.yaml (Terminal-Bench 1) or task.json (t1 native), got none of them`,
    ])
  })

  it("says so when a directory holds no tasks at all", async () => {
    const empty = join(scratch, "no-tasks-here")
    mkdirSync(join(empty, "docs"), { recursive: true })
    const { exit } = await run(loadTasksSettled([empty]))
    expect(exit._tag === "Success" ? exit.value.failures.map((f) => f.message) : []).toEqual([
      `${empty}: expected a task directory, or a directory of tasks, got no task.toml, task.yaml or task.json in it or below it`,
    ])
  })

  it("reports a second task with the same id in the same task set", async () => {
    const root = join(scratch, "dupes")
    cpSync(fixture("native/grep-errors"), join(root, "set", "a"), { recursive: true })
    cpSync(fixture("native/grep-errors"), join(root, "set", "b"), { recursive: true })
    const { exit } = await run(loadTasksSettled([root]))
    if (exit._tag !== "Success") throw new Error(String(exit.cause))
    expect(exit.value.tasks).toHaveLength(1)
    expect(exit.value.failures.map((f) => f.message)).toEqual([
      `${join(root, "set", "b")}: id: expected an id unique in task set fixtures-native, got "grep-errors", which ${join(root, "set", "a")} has too`,
    ])
  })
})

/** Loads the variant and returns its error message, with the variant's directory shown as `<task>`. */
const failure = async (
  from: string,
  edits: Readonly<Record<string, string | Uint8Array | null>>,
): Promise<string> => {
  const dir = variant(from, edits)
  const error = await loadError(dir)
  expect(error).toBeInstanceOf(TaskLoadError)
  return error.message.split(dir).join("<task>")
}

describe("a malformed Terminal-Bench 2 task fails naming the file, the field and what was expected", () => {
  const tb2 = "tb2/csv-column-sum"
  const toml = (change: (text: string) => string) => edit(tb2, "task.toml", change)

  it.each([
    [
      "a timeout that is not a number",
      toml((t) => t.replace("timeout_sec = 900.0", 'timeout_sec = "soon"')),
      '<task>/task.toml: [agent].timeout_sec: expected a positive number, got "soon"',
    ],
    [
      "a negative timeout",
      toml((t) => t.replace("timeout_sec = 120.0", "timeout_sec = -5")),
      "<task>/task.toml: [verifier].timeout_sec: expected a positive number, got -5",
    ],
    [
      "an unknown schema version",
      toml((t) => t.replace('version = "1.1"', 'version = "2.0"')),
      '<task>/task.toml: version: expected schema version "1.0" or "1.1" (no other is known), got "2.0"',
    ],
    [
      "a schema version that is not a string",
      toml((t) => t.replace('version = "1.1"', "version = 1.1")),
      "<task>/task.toml: version: expected a string, got 1.1",
    ],
    [
      "a size that is not a size",
      toml((t) => t.replace("memory_mb = 4096", 'memory = "lots"')),
      '<task>/task.toml: [environment].memory: expected a size like "2G" or "512M", got "lots"',
    ],
    [
      "both spellings of a size",
      toml((t) => t.replace("memory_mb = 4096", 'memory_mb = 4096\nmemory = "4G"')),
      '<task>/task.toml: [environment].memory: expected either memory or memory_mb, not both, got "4G"',
    ],
    [
      "a relative workdir",
      toml((t) => t.replace('workdir = "/app"', 'workdir = "app"')),
      '<task>/task.toml: [environment].workdir: expected an absolute path, got "app"',
    ],
    [
      "tags that are not a list of strings",
      toml((t) => t.replace('tags = ["csv", "python"]', 'tags = "csv"')),
      '<task>/task.toml: [metadata].tags: expected a list of strings, got "csv"',
    ],
    [
      "a section that is not a table",
      'version = "1.1"\nagent = 5\n',
      "<task>/task.toml: agent: expected a table, got 5",
    ],
    [
      "broken TOML",
      toml((t) => t.replace("cpus = 2", "cpus = = 2")),
      "<task>/task.toml: expected valid TOML, got a syntax error at line 21, column 8: invalid value",
    ],
  ])("%s", async (_, taskToml, message) => {
    expect(await failure(tb2, { "task.toml": taskToml })).toBe(message)
  })

  it.each([
    [
      "no instruction.md",
      { "instruction.md": null },
      "<task>/instruction.md: expected the task's instruction (a markdown file), got nothing (it does not exist)",
    ],
    [
      "a blank instruction.md",
      { "instruction.md": "\n  \n" },
      "<task>/instruction.md: expected a non-empty instruction, got a blank file",
    ],
    [
      "an instruction.md that is not UTF-8",
      {
        "instruction.md": Buffer.concat([
          Buffer.from("Sum the column.\nCaf"),
          Buffer.from([0xe9]),
          Buffer.from("!\n"),
        ]),
      },
      "<task>/instruction.md: expected UTF-8 text, got a byte that is not UTF-8 on line 2 (0xe9 at byte offset 19)",
    ],
    [
      "a task.toml that is not UTF-8",
      { "task.toml": Buffer.from([0x76, 0x65, 0x72, 0xff, 0x0a]) },
      "<task>/task.toml: expected UTF-8 text, got a byte that is not UTF-8 on line 1 (0xff at byte offset 3)",
    ],
    [
      "no tests/",
      { tests: null },
      "<task>/tests: expected a directory with the task's tests, got nothing (it does not exist)",
    ],
    [
      "no tests/test.sh",
      { "tests/test.sh": null },
      "<task>/tests/test.sh: expected the verifier's entry point, tests/test.sh, got nothing (it does not exist)",
    ],
    [
      "neither an image nor an environment to build",
      {
        environment: null,
        "task.toml": edit("tb2/csv-column-sum", "task.toml", (t) =>
          t.replace(/docker_image = .*\n/, ""),
        ),
      },
      "<task>/task.toml: [environment].docker_image: expected an image name, since there is no environment/Dockerfile to build one from, got nothing",
    ],
  ])("%s", async (_, edits, message) => {
    expect(await failure("tb2/csv-column-sum", edits)).toBe(message)
  })
})

describe("a malformed Terminal-Bench 1 task fails naming the file, the field and what was expected", () => {
  const yaml = (change: (text: string) => string) => edit("tb1/word-count", "task.yaml", change)

  it.each([
    [
      "broken YAML",
      yaml((t) => t.replace("tags:\n", "tags: [file-operations\n")),
      "<task>/task.yaml: expected valid YAML, got a syntax error at line 12, column 1: Flow sequence in block collection must be sufficiently indented and end with a ]",
    ],
    [
      "no instruction at all",
      yaml((t) => t.replace(/^instruction: [\s\S]*?(?=^author_name)/m, "")),
      '<task>/task.yaml: instruction: expected the instruction (a string), or a descriptions list with a "base" entry, got nothing',
    ],
    [
      "an instruction that is a list",
      "instruction: [a, b]\n",
      '<task>/task.yaml: instruction: expected a non-empty string, got a list ["a","b"]',
    ],
    [
      "a description that is not a string",
      "descriptions:\n  - key: base\n    description: 42\n",
      "<task>/task.yaml: descriptions[0].description: expected a non-empty string, got 42",
    ],
    [
      "descriptions that are not a list",
      "descriptions: soon\n",
      '<task>/task.yaml: descriptions: expected a list of mappings, got "soon"',
    ],
    [
      "a timeout in words",
      yaml((t) => t.replace("max_agent_timeout_sec: 600.0", "max_agent_timeout_sec: ten minutes")),
      '<task>/task.yaml: max_agent_timeout_sec: expected a positive number, got "ten minutes"',
    ],
    [
      "an unknown difficulty",
      yaml((t) => t.replace("difficulty: easy", "difficulty: impossible")),
      '<task>/task.yaml: difficulty: expected one of "easy", "medium", "hard", "unknown", got "impossible"',
    ],
    [
      "a flag that is not a boolean",
      yaml((t) => t.replace("run_tests_in_same_shell: false", "run_tests_in_same_shell: maybe")),
      '<task>/task.yaml: run_tests_in_same_shell: expected true or false, got "maybe"',
    ],
    [
      "a document that is a list",
      "- instruction: hi\n",
      '<task>/task.yaml: expected a mapping of task settings at the top, got a list [{"instruction":"hi"}]',
    ],
  ])("%s", async (_, taskYaml, message) => {
    expect(await failure("tb1/word-count", { "task.yaml": taskYaml })).toBe(message)
  })

  it.each([
    [
      "no run-tests.sh",
      { "run-tests.sh": null },
      "<task>/run-tests.sh: expected the verifier's entry point, run-tests.sh, got nothing (it does not exist)",
    ],
    [
      "no tests/",
      { tests: null },
      "<task>/tests: expected a directory with the task's tests, got nothing (it does not exist)",
    ],
    [
      "no Dockerfile and no image",
      { Dockerfile: null, "docker-compose.yaml": null },
      "<task>/Dockerfile: expected the task's environment (a Dockerfile, or an image in docker-compose.yaml), got nothing (it does not exist)",
    ],
    [
      "a compose build naming a Dockerfile that is not there",
      {
        "docker-compose.yaml":
          "services:\n  client:\n    build:\n      context: .\n      dockerfile: Dockerfile.client\n",
      },
      "<task>/docker-compose.yaml: services.client.build: expected a Dockerfile at <task>/Dockerfile.client, got nothing there",
    ],
    [
      "a compose file with no service for the agent",
      {
        "docker-compose.yaml":
          "services:\n  db:\n    image: postgres\n  cache:\n    image: redis\n",
      },
      '<task>/docker-compose.yaml: services.client: expected a "client" service for the agent (services: db, cache), got nothing',
    ],
    [
      "a keystroke entry without its keys",
      {
        "solution.sh": null,
        "solution.yaml": "- command: ls\n  append_enter: true\n- min_timeout_sec: 1\n",
      },
      "<task>/solution.yaml: [1].command: expected the keys to type (a string), got nothing",
    ],
    [
      "a keystroke entry with a bad wait",
      { "solution.sh": null, "solution.yaml": "- command: ls\n  min_timeout_sec: soon\n" },
      '<task>/solution.yaml: [0].min_timeout_sec: expected a number >= 0, got "soon"',
    ],
  ])("%s", async (_, edits, message) => {
    expect(await failure("tb1/word-count", edits)).toBe(message)
  })
})

describe("a malformed native task fails naming the file, the field and what was expected", () => {
  const json = (fields: Record<string, unknown>) =>
    JSON.stringify({ split: "train", ...fields }, null, 2)

  it.each([
    [
      "an unknown field",
      json({ colour: "red" }),
      "<task>/task.json: colour: expected a known field (id, task_set, family, difficulty, split, tags, image, workdir, allow_internet, cpus, memory_mb, agent_timeout_sec, verifier_timeout_sec, expected_tests), got an unknown field",
    ],
    ["no split", "{}", '<task>/task.json: split: expected one of "train", "eval", got nothing'],
    [
      "a number written as a string",
      json({ cpus: "2" }),
      '<task>/task.json: cpus: expected a positive number, got "2"',
    ],
    [
      "a fractional timeout",
      json({ agent_timeout_sec: 1.5 }),
      "<task>/task.json: agent_timeout_sec: expected a positive integer, got 1.5",
    ],
    [
      "a negative test count",
      json({ expected_tests: -1 }),
      "<task>/task.json: expected_tests: expected an integer >= 0, got -1",
    ],
    [
      "an unknown difficulty",
      json({ difficulty: "extreme" }),
      '<task>/task.json: difficulty: expected one of "easy", "medium", "hard", got "extreme"',
    ],
    [
      "a relative workdir",
      json({ workdir: "app" }),
      '<task>/task.json: workdir: expected an absolute path, got "app"',
    ],
    [
      "an id with a slash",
      json({ id: "a/b" }),
      '<task>/task.json: id: expected a task id (non-empty, no slashes or spaces), got "a/b"',
    ],
    [
      "a flag written as a string",
      json({ allow_internet: "no" }),
      '<task>/task.json: allow_internet: expected true or false, got "no"',
    ],
    [
      "a document that is not an object",
      "[1, 2]",
      "<task>/task.json: expected an object of task settings at the top, got a list [1,2]",
    ],
    [
      "broken JSON",
      '{\n  "split": "train",\n  "cpus" 2\n}\n',
      "<task>/task.json: expected valid JSON, got a syntax error at line 3, column 10: Unexpected number",
    ],
  ])("%s", async (_, taskJson, message) => {
    expect(await failure("native/grep-errors", { "task.json": taskJson })).toBe(message)
  })

  it("fails without tests/ or instruction.md", async () => {
    expect(await failure("native/grep-errors", { tests: null })).toBe(
      "<task>/tests: expected a directory with the task's tests, got nothing (it does not exist)",
    )
    expect(await failure("native/grep-errors", { "instruction.md": null })).toBe(
      "<task>/instruction.md: expected the task's instruction (a markdown file), got nothing (it does not exist)",
    )
  })
})

describe("the Dockerfile's working directory", () => {
  it("follows the final stage, relative WORKDIRs and stages built on stages", async () => {
    const workdir = async (lines: ReadonlyArray<string>) => {
      const file = join(scratch, `Dockerfile.${++copies}`)
      writeFileSync(file, lines.join("\n"))
      return Effect.runPromise(dockerfileWorkdir(file))
    }
    expect(await workdir(["FROM python:3.13", "WORKDIR /srv", "WORKDIR app/"])).toBe("/srv/app")
    expect(
      await workdir(["FROM python:3.13 AS build", "WORKDIR /build", "FROM ubuntu:24.04"]),
    ).toBe(undefined)
    expect(
      await workdir(["FROM python:3.13 AS base", "WORKDIR /opt/x", "FROM base", "RUN true"]),
    ).toBe("/opt/x")
    expect(await workdir(["FROM python:3.13", 'WORKDIR "/quoted dir"'])).toBe("/quoted dir")
    expect(await workdir(["FROM python:3.13", "WORKDIR $HOME/app"])).toBeUndefined()
  })
})

describe("UTF-8 checking", () => {
  it("finds the first byte that breaks UTF-8", () => {
    const bytes = (...b: number[]) => Uint8Array.from(b)
    expect(invalidUtf8Offset(new TextEncoder().encode("héllo — ✓ 𝄞"))).toBe(-1)
    expect(invalidUtf8Offset(bytes(0x61, 0xff))).toBe(1)
    expect(invalidUtf8Offset(bytes(0x61, 0xc3))).toBe(1) // truncated sequence
    expect(invalidUtf8Offset(bytes(0xc0, 0xaf))).toBe(0) // overlong "/"
    expect(invalidUtf8Offset(bytes(0xed, 0xa0, 0x80))).toBe(0) // a surrogate
    expect(invalidUtf8Offset(bytes(0xf4, 0x90, 0x80, 0x80))).toBe(0) // past U+10FFFF
  })
})
