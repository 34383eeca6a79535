/**
 * One task, whatever format it was loaded from (Terminal-Bench 2, Terminal-Bench 1, t1 native).
 * Paths are absolute on the machine that loaded it; the proto `Task` is the wire form.
 */
export type TaskFormat = "tb2" | "tb1" | "native"
export type TaskSplit = "train" | "eval" | "unspecified"

export interface TaskEnvironment {
  /** Prebuilt image to use when the engine has it (may be unpullable here). */
  readonly dockerImage: string
  /** Directory holding the environment's Dockerfile and build context, when the task has one. */
  readonly buildContext: string | undefined
  /** Dockerfile path relative to buildContext (usually "Dockerfile"). */
  readonly dockerfile: string | undefined
  readonly cpus: number
  readonly memoryMb: number
  readonly storageMb: number
  readonly allowInternet: boolean
  /** The agent's starting directory inside the sandbox, e.g. /app. */
  readonly workdir: string
  /**
   * Host path of a script run in the sandbox (bash, as the sandbox user, cwd = workdir) before
   * the agent starts: how native tasks prepare their files without an image build.
   */
  readonly setupScript: string | undefined
}

export interface TaskVerifier {
  /** Host directory with the test files, copied to testDir after the episode. */
  readonly testsDir: string
  /** Where the tests go inside the sandbox. */
  readonly testDir: string
  /**
   * How to run them: "pytest" (run pytest on the test files with a machine-readable report)
   * or "script" (run the test script and read /logs/verifier/reward.{txt,json} or its output).
   */
  readonly kind: "pytest" | "script"
  /** The script, relative to testDir (e.g. test.sh, run-tests.sh); for kind "script". */
  readonly script: string | undefined
  /**
   * Host path of that script. TB2's test.sh lies inside testsDir; TB1's run-tests.sh lies at the
   * task root, and the verifier copies it to `${testDir}/${script}` beside the tests (as TB1 does).
   */
  readonly scriptPath: string | undefined
  /** TB1 parser name ("pytest" parses the -rA short summary). */
  readonly parser: string | undefined
  readonly timeoutSec: number
  /** Tests the verifier is expected to report; 0 when unknown. */
  readonly expectedTests: number
}

export interface Task {
  readonly id: string
  readonly taskSet: string
  readonly format: TaskFormat
  /** Directory the task was loaded from. */
  readonly dir: string
  readonly instruction: string
  readonly difficulty: string
  readonly tags: ReadonlyArray<string>
  readonly family: string
  readonly split: TaskSplit
  /** Wall-clock budget of the episode; 0 when the task sets none (the job's limits apply). */
  readonly agentTimeoutSec: number
  readonly environment: TaskEnvironment
  readonly verifier: TaskVerifier
  /** Reference solution script on the host (solve.sh / solution.sh), if any. */
  readonly solution: string | undefined
}
