import { execFile } from "node:child_process"
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { availableParallelism, tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { BASH_APP_LINE, BASH_LOGS_LINE } from "./bash-tests.ts"

/**
 * For tests: runs a native task end to end in a throwaway container of the base image, twice —
 * once as a no-op agent (setup only) and once with the reference solution — and reports which
 * tests passed each time. Independent of the verifier actor on purpose: it checks the task, not
 * the harness.
 */
export interface PhaseResult {
  readonly passed: ReadonlyArray<string>
  readonly failed: ReadonlyArray<string>
}

export interface TaskRun {
  readonly noop: PhaseResult
  readonly solved: PhaseResult
  /** Output of setup/solve when either exited non-zero, else "". */
  readonly problems: string
  readonly durationMs: number
}

const run = promisify(execFile)

const IMAGE = "t1-base:latest"

// A task with tests/test.sh runs it and reads its CTRF report; else pytest runs the test files.
const SCRIPT = String.raw`
set -u
report() {
  if [ -f /tests/test.sh ]; then
    rm -rf /logs/verifier && mkdir -p /logs/verifier
    bash /tests/test.sh >/dev/null 2>&1
    python3 -c 'import json, sys
for t in json.load(open("/logs/verifier/ctrf.json"))["results"]["tests"]:
    print(sys.argv[1], "PASSED" if t["status"] == "passed" else "FAILED", t["name"])' "$1"
    return
  fi
  python3 -m pytest -q -rA -p no:cacheprovider /tests 2>&1 \
    | sed -n -E "s/^(PASSED|FAILED|ERROR) [^ ]*::(test_[A-Za-z0-9_]+).*/$1 \1 \2/p"
}
fresh() { cd / && rm -rf /app && mkdir -p /app && cd /app; }
cp -r /task/tests /tests
fresh
bash /task/setup.sh >/tmp/setup.out 2>&1 || { echo "PROBLEM setup exited $?"; cat /tmp/setup.out; }
report noop
fresh
bash /task/setup.sh >/dev/null 2>&1
bash /task/solution/solve.sh >/tmp/solve.out 2>&1 || { echo "PROBLEM solve exited $?"; cat /tmp/solve.out; }
cd /app && report solved
`

export const dockerAvailable = async (): Promise<boolean> => {
  try {
    await run("docker", ["image", "inspect", IMAGE], { timeout: 20_000 })
    return true
  } catch {
    return false
  }
}

export const runTaskInDocker = async (taskDir: string): Promise<TaskRun> => {
  const started = Date.now()
  const { stdout } = await run(
    "docker",
    [
      "run",
      "--rm",
      "--network",
      "none",
      "-v",
      `${taskDir}:/task:ro`,
      IMAGE,
      "timeout",
      "120",
      "bash",
      "-c",
      SCRIPT,
    ],
    { timeout: 150_000, maxBuffer: 16 * 1024 * 1024 },
  )
  return { ...parsePhases(stdout), durationMs: Date.now() - started }
}

/** The report lines of SCRIPT: `<phase> PASSED|FAILED|ERROR <test>`, else problems. */
const parsePhases = (stdout: string): Omit<TaskRun, "durationMs"> => {
  const phases = { noop: { passed: [], failed: [] }, solved: { passed: [], failed: [] } } as {
    noop: { passed: string[]; failed: string[] }
    solved: { passed: string[]; failed: string[] }
  }
  const problems: string[] = []
  for (const line of stdout.split("\n")) {
    const m = /^(noop|solved) (PASSED|FAILED|ERROR) (\w+)$/.exec(line)
    if (m === null) {
      if (line !== "") problems.push(line)
      continue
    }
    const phase = phases[m[1] as "noop" | "solved"]
    ;(m[2] === "PASSED" ? phase.passed : phase.failed).push(m[3] as string)
  }
  return { ...phases, problems: problems.join("\n") }
}

/** The tests of a CTRF report (`{"results": {"tests": [{name, status}]}}`), or undefined. */
const ctrfTests = (
  text: string,
): ReadonlyArray<{ readonly name: string; readonly status: string }> | undefined => {
  try {
    const tests: unknown = JSON.parse(text)?.results?.tests
    if (!Array.isArray(tests)) return undefined
    return tests.map((t: { name?: unknown; status?: unknown }) => ({
      name: String(t.name),
      status: String(t.status),
    }))
  } catch {
    return undefined
  }
}

/** The line of a task's tests that names the workdir; the local run points it at a temp dir. */
const APP_LINE = 'APP = Path("/app")'
/** The same lines of a test script (tests/test.sh), and where it writes its CTRF report. */
const SCRIPT_LINES = [BASH_APP_LINE, BASH_LOGS_LINE] as const

const PYTEST_LINE = /^(PASSED|FAILED|ERROR) (?:\S*\/)?t(\d+)\/(test_\w+\.py)::(test_\w+)/

export interface LocalTask {
  /** A native task directory. */
  readonly dir: string
  /**
   * The agent's commands, run one after another in one bash without errexit, as the persistent
   * shell runs them; default: `bash solution/solve.sh`.
   */
  readonly turns?: ReadonlyArray<string>
}

/**
 * For tests: runs native tasks with the host's bash, python3 and pytest in temporary workdirs (no
 * container), each as a no-op agent and as the reference solution, in one batch (two pytest
 * processes in all, so hundreds of small tasks take seconds). Each test file's
 * `APP = Path("/app")` line is pointed at the task's temporary workdir, so this suits families
 * whose tests reach the workdir only through APP (the ladder's); a test file without that line
 * is refused. A task with a test script (tests/test.sh, the ladder's) runs it instead, its
 * `APP=/app` and `LOGS=/logs/verifier` lines pointed at temporary directories, and reads its
 * CTRF report.
 */
export const runTasksLocally = async (
  tasks: ReadonlyArray<LocalTask>,
): Promise<ReadonlyArray<TaskRun>> => {
  const started = Date.now()
  const scratch = await mkdtemp(join(tmpdir(), "t1-local-tasks-"))
  try {
    const phases = ["noop", "solved"] as const
    // Each task's lines are independent (own workdir, own tests), so they run in shards, one
    // bash per core.
    const shards = Math.max(1, Math.min(availableParallelism(), tasks.length))
    const drivers: Array<Array<string>> = Array.from({ length: shards }, () => ["set -u"])
    const scriptedRuns: Array<{ task: number; phase: (typeof phases)[number]; script: string }> = []
    for (const [i, task] of tasks.entries()) {
      const driver = drivers[i % shards] as Array<string>
      for (const phase of phases) {
        const work = join(scratch, phase, "work", `t${i}`)
        const tests = join(scratch, phase, "tests", `t${i}`)
        await mkdir(work, { recursive: true })
        await mkdir(tests, { recursive: true })
        const q = (path: string) => `'${path.replaceAll("'", `'\\''`)}'`
        const names = await readdir(join(task.dir, "tests"))
        const scripted = names.includes("test.sh")
        for (const name of names) {
          const text = await readFile(join(task.dir, "tests", name), "utf8")
          if (scripted && name === "test.sh") {
            for (const line of SCRIPT_LINES)
              if (!text.split("\n").includes(line))
                throw new Error(`${task.dir}/tests/test.sh does not set ${line}`)
            await writeFile(
              join(tests, name),
              text
                .replace(`\n${BASH_APP_LINE}\n`, `\nAPP=${q(work)}\n`)
                .replace(`\n${BASH_LOGS_LINE}\n`, `\nLOGS=${q(join(tests, "logs"))}\n`),
            )
            continue
          }
          if (scripted) continue
          if (name.endsWith(".py") && !text.includes(APP_LINE))
            throw new Error(`${task.dir}/tests/${name} does not set ${APP_LINE}`)
          await writeFile(
            join(tests, name),
            text.replace(APP_LINE, `APP = Path(${JSON.stringify(work)})`),
          )
        }
        if (scripted) scriptedRuns.push({ task: i, phase, script: join(tests, "test.sh") })
        const log = join(scratch, phase, `t${i}.out`)
        driver.push(
          `(cd ${q(work)} && bash ${q(join(task.dir, "setup.sh"))}) >${q(log)} 2>&1 || { echo "PROBLEM t${i} setup exited $?"; sed 's/^/PROBLEM t${i} /' ${q(log)}; }`,
        )
        if (phase === "solved") {
          const turns = join(scratch, `t${i}.turns.sh`)
          await writeFile(
            turns,
            task.turns === undefined
              ? `bash ${q(join(task.dir, "solution", "solve.sh"))}\n`
              : `${task.turns.join("\n")}\n`,
          )
          driver.push(
            `(cd ${q(work)} && bash ${q(turns)}) >${q(log)} 2>&1 || { echo "PROBLEM t${i} solve exited $?"; sed 's/^/PROBLEM t${i} /' ${q(log)}; }`,
          )
        }
      }
    }
    // Test scripts run after every agent, as pytest does below.
    for (const r of scriptedRuns)
      drivers[r.task % shards]?.push(`bash '${r.script}' >/dev/null 2>&1 || true`)
    const outputs = await Promise.all(
      drivers.map(async (driver, k) => {
        const driverScript = join(scratch, `driver${k}.sh`)
        await writeFile(driverScript, `${driver.join("\n")}\n`)
        const { stdout } = await run("bash", [driverScript], {
          timeout: 300_000,
          maxBuffer: 64 * 1024 * 1024,
        })
        return stdout
      }),
    )
    const problemText = outputs.join("\n")
    const results = tasks.map(() => ({
      noop: { passed: [] as string[], failed: [] as string[] },
      solved: { passed: [] as string[], failed: [] as string[] },
      problems: [] as string[],
    }))
    for (const line of problemText.split("\n")) {
      const m = /^PROBLEM t(\d+) (.*)$/.exec(line)
      if (m !== null) results[Number(m[1])]?.problems.push(m[2] as string)
    }
    for (const r of scriptedRuns) {
      const result = results[r.task]
      if (result === undefined) continue
      const report = await readFile(join(r.script, "..", "logs", "ctrf.json"), "utf8").catch(
        () => undefined,
      )
      const tests = report === undefined ? undefined : ctrfTests(report)
      if (tests === undefined) {
        result.problems.push(`${r.phase}: no CTRF report from tests/test.sh`)
        continue
      }
      for (const t of tests)
        (t.status === "passed" ? result[r.phase].passed : result[r.phase].failed).push(t.name)
    }
    for (const phase of phases) {
      if (scriptedRuns.length === tasks.length * phases.length) break
      const { stdout } = await run(
        "python3",
        ["-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--import-mode=importlib", "."],
        { cwd: join(scratch, phase, "tests"), timeout: 300_000, maxBuffer: 64 * 1024 * 1024 },
      ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? "" }))
      for (const line of stdout.split("\n")) {
        const m = PYTEST_LINE.exec(line)
        if (m === null) {
          const broken = /^ERROR (?:\S*\/)?t(\d+)\/(\S+)/.exec(line)
          if (broken !== null) results[Number(broken[1])]?.problems.push(`${phase}: ${line}`)
          continue
        }
        const result = results[Number(m[2])]
        if (result === undefined) continue
        ;(m[1] === "PASSED" ? result[phase].passed : result[phase].failed).push(m[4] as string)
      }
    }
    const durationMs = Date.now() - started
    return results.map((r) => ({ ...r, problems: r.problems.join("\n"), durationMs }))
  } finally {
    await rm(scratch, { recursive: true, force: true })
  }
}

/** runTasksLocally for one task. */
export const runTaskLocally = async (
  taskDir: string,
  turns?: ReadonlyArray<string>,
): Promise<TaskRun> => {
  const [result] = await runTasksLocally([
    turns === undefined ? { dir: taskDir } : { dir: taskDir, turns },
  ])
  if (result === undefined) throw new Error("runTasksLocally returned nothing")
  return result
}
