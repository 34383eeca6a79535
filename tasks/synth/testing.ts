import { execFile } from "node:child_process"
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
  return { ...phases, problems: problems.join("\n"), durationMs: Date.now() - started }
}
