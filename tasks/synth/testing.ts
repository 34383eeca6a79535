import { execFile } from "node:child_process"
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"

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

const SCRIPT = String.raw`
set -u
report() {
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

/** The line of a task's tests that names the workdir; the local run points it at a temp dir. */
const APP_LINE = 'APP = Path("/app")'

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
 * is refused.
 */
export const runTasksLocally = async (
  tasks: ReadonlyArray<LocalTask>,
): Promise<ReadonlyArray<TaskRun>> => {
  const started = Date.now()
  const scratch = await mkdtemp(join(tmpdir(), "t1-local-tasks-"))
  try {
    const phases = ["noop", "solved"] as const
    const driver: Array<string> = ["set -u"]
    for (const [i, task] of tasks.entries()) {
      for (const phase of phases) {
        const work = join(scratch, phase, "work", `t${i}`)
        const tests = join(scratch, phase, "tests", `t${i}`)
        await mkdir(work, { recursive: true })
        await mkdir(tests, { recursive: true })
        for (const name of await readdir(join(task.dir, "tests"))) {
          const text = await readFile(join(task.dir, "tests", name), "utf8")
          if (name.endsWith(".py") && !text.includes(APP_LINE))
            throw new Error(`${task.dir}/tests/${name} does not set ${APP_LINE}`)
          await writeFile(
            join(tests, name),
            text.replace(APP_LINE, `APP = Path(${JSON.stringify(work)})`),
          )
        }
        const q = (path: string) => `'${path.replaceAll("'", `'\\''`)}'`
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
    const driverScript = join(scratch, "driver.sh")
    await writeFile(driverScript, `${driver.join("\n")}\n`)
    const { stdout: problemText } = await run("bash", [driverScript], {
      timeout: 300_000,
      maxBuffer: 64 * 1024 * 1024,
    })
    const results = tasks.map(() => ({
      noop: { passed: [] as string[], failed: [] as string[] },
      solved: { passed: [] as string[], failed: [] as string[] },
      problems: [] as string[],
    }))
    for (const line of problemText.split("\n")) {
      const m = /^PROBLEM t(\d+) (.*)$/.exec(line)
      if (m !== null) results[Number(m[1])]?.problems.push(m[2] as string)
    }
    for (const phase of phases) {
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
