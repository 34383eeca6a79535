import { Effect } from "effect"
import {
  TOOLCHAIN_BASH,
  TOOLCHAIN_BIN,
  TOOLCHAIN_PYTHON,
  TOOLCHAIN_TIMEOUT,
} from "../sandbox/index.ts"
import { VerifierInfraError } from "./errors.ts"
import type { ShellResult, VerifierSandboxShape } from "./port.ts"
import { shellQuote } from "./shell.ts"

/** How one verification runs its commands. */
export interface Guarded {
  readonly sandbox: VerifierSandboxShape
  /** The interpreter that runs pytest; undefined: the sandbox's own `python3`. */
  readonly python: string | undefined
  readonly notes: ReadonlyArray<string>
  /**
   * True: the agent's processes were stopped from outside and the commands run with the
   * read-only toolchain. False: verified with the sandbox's own shell and Python (a driver that
   * cannot seal, a sandbox created without the toolchain), which the agent could have replaced.
   */
  readonly guarded: boolean
  /** Files under the site directories the seal put back or removed (capped lists). */
  readonly pristineFiles: ReadonlyArray<string>
  /**
   * Set when a sandbox that has the toolchain could not be guarded (the seal refused, the
   * toolchain does not run, the workdir is gone): the tests must not run, and the outcome is
   * unverifiable with this reason. Never a fallback to the sandbox's own programs.
   */
  readonly unverifiable?: string
}

/**
 * The directories the verifier's Python imports from besides the toolchain (see
 * toolchain/python3): the sandbox's site directories. Whatever the agent changed there is put
 * back to the image's before the tests run, so a patched library cannot run inside pytest.
 */
export const PRISTINE_PATHS: ReadonlyArray<string> = [
  "/usr/local/lib/python3*/dist-packages",
  "/usr/local/lib/python3*/site-packages",
  "/usr/lib/python3/dist-packages",
  "/usr/lib/python3.*/dist-packages",
  "/usr/lib/python3.*/site-packages",
]

/**
 * Stop, restart and restore: well under a few seconds unless the agent changed a lot (or the
 * engine is loaded). A caller of the verifier waits this long on top of the tests' own timeout.
 */
export const SEAL_TIMEOUT_MS = 120_000

/** Seconds `timeout` gives a command that ignores SIGTERM before it sends SIGKILL. */
const KILL_AFTER_SEC = 2

/** timeout(1)'s exit status when the command ran out of time. */
const TIMED_OUT = 124

/**
 * argv running `script` in the toolchain's bash, its tools first on PATH, stopped at `timeoutMs`,
 * from `/` (the engine starts it there: nothing the agent removed can stop it from starting).
 * `-p`: no BASH_ENV, no functions from the environment; the environment is the container's own
 * (the image's and the spec's), nothing the agent exported.
 */
export const guardedArgv = (script: string, timeoutMs: number): ReadonlyArray<string> => [
  TOOLCHAIN_TIMEOUT,
  // SIGINT, as a shell's timeout interrupts a command: pytest then writes what it has so far.
  "--signal=INT",
  `--kill-after=${KILL_AFTER_SEC}`,
  `${Math.max(1, Math.ceil(timeoutMs / 1000))}`,
  TOOLCHAIN_BASH,
  "--noprofile",
  "--norc",
  "-p",
  "-c",
  // An image without PATH would leave an empty entry (the working directory) after ours.
  `PATH=${TOOLCHAIN_BIN}:\${PATH:-/usr/local/bin:/usr/bin:/bin}\ncd /\n${script}`,
]

export const UNGUARDED =
  "unguarded: verified with the sandbox's own shell and Python, which the agent could have replaced"

const READY = "t1v-ready"
const NO_WORKDIR = "t1v-no-workdir"

/** The probe's budget: the toolchain's Python starting, on a loaded machine. */
const PROBE_TIMEOUT_MS = 30_000

const files = (count: number) => `${count} file${count === 1 ? "" : "s"}`
const listed = (list: ReadonlyArray<string>, count: number) =>
  `${list.slice(0, 20).join(", ")}${count > 20 ? `, … (${count} in all)` : ""}`

/**
 * Prepares a sandbox for a verification the agent cannot forge. From outside the sandbox its
 * driver seals it (actors/sandbox driver `seal`: every process is killed with its whole PID
 * namespace and the sandbox restarted with a fresh init and a main process from the read-only
 * toolchain; the Python site directories are put back to the image's), then a probe checks that
 * the toolchain runs and the workdir is there. Every command from then on runs outside the
 * agent's shell with the toolchain's bash, tools and Python. A sandbox that has the toolchain and
 * cannot be guarded is unverifiable (fail closed); only a driver without a seal or a sandbox
 * created without the toolchain is verified with its own programs, and the outcome says so.
 */
export const guard = (
  sandbox: VerifierSandboxShape,
  task: { readonly workdir: string } = { workdir: "/" },
): Effect.Effect<Guarded, VerifierInfraError> =>
  Effect.gen(function* () {
    const execArgv = sandbox.execArgv
    const seal = sandbox.seal
    const unguarded = (why: string): Guarded => ({
      sandbox,
      python: undefined,
      notes: [`${UNGUARDED}: ${why}`],
      guarded: false,
      pristineFiles: [],
    })
    const refused = (reason: string): Guarded => ({
      sandbox,
      python: undefined,
      notes: [],
      guarded: true,
      pristineFiles: [],
      unverifiable: reason,
    })
    if (execArgv === undefined || seal === undefined)
      return unguarded("its driver cannot stop the agent's processes from outside the sandbox")
    const sealed = yield* seal({ pristinePaths: PRISTINE_PATHS, timeoutMs: SEAL_TIMEOUT_MS }).pipe(
      Effect.map((report) => ({ ok: true as const, report })),
      Effect.catch((e) =>
        e.infra
          ? Effect.fail(
              new VerifierInfraError({
                stage: "stopping the agent's processes",
                reason: e.reason,
                retryable: true,
              }),
            )
          : Effect.succeed({ ok: false as const, reason: e.reason }),
      ),
    )
    if (!sealed.ok)
      return refused(`the sandbox could not be sealed before the tests: ${sealed.reason}`)
    const report = sealed.report
    if (report === undefined)
      return unguarded("its driver cannot stop the agent's processes from outside the sandbox")
    if (!report.toolchain)
      return unguarded("the sandbox has no verifier toolchain (its host created it without one)")

    const probeScript = [
      `[ -d ${shellQuote(task.workdir)} ] || { echo ${NO_WORKDIR}; exit 3; }`,
      // Starting the interpreter is what depends on the sandbox (its loader, its libraries, its
      // /tmp); pytest is the toolchain's own, read-only, and a pytest that cannot start writes no
      // report, which a guarded verification already calls unverifiable. Importing it here cost
      // ~150 ms of CPU per episode, the largest part of a guarded verification's overhead.
      `exec ${shellQuote(TOOLCHAIN_PYTHON)} -c ${shellQuote(`print(${JSON.stringify(READY)})`)}`,
    ].join("\n")
    const probed = yield* execArgv(guardedArgv(probeScript, PROBE_TIMEOUT_MS), {
      timeoutMs: PROBE_TIMEOUT_MS + 10_000,
      maxOutputBytes: 8192,
    }).pipe(
      Effect.map((r) => ({ ok: true as const, result: r })),
      Effect.catch((e) =>
        e.infra
          ? Effect.fail(
              new VerifierInfraError({
                stage: "starting the verifier toolchain",
                reason: e.reason,
                retryable: true,
              }),
            )
          : Effect.succeed({ ok: false as const, reason: e.reason }),
      ),
    )
    if (!probed.ok) return refused(`the verifier toolchain could not be started: ${probed.reason}`)
    const text = new TextDecoder().decode(probed.result.output)
    if (text.includes(NO_WORKDIR))
      return refused(
        `the task's workdir ${task.workdir} is gone after the episode (removed in the sandbox): the tests have nothing to run in`,
      )
    if (probed.result.exitCode !== 0 || probed.result.timedOut || !text.includes(READY))
      return refused(
        `the verifier toolchain does not run in this sandbox (exit ${probed.result.timedOut ? "timed out" : probed.result.exitCode}): ${text.slice(-500).trim() || "no output"}`,
      )

    const script = (
      command: string,
      options: { readonly timeoutMs: number; readonly maxOutputBytes: number },
    ) =>
      execArgv(guardedArgv(command, options.timeoutMs), {
        ...options,
        timeoutMs: options.timeoutMs + (KILL_AFTER_SEC + 8) * 1000,
      }).pipe(
        Effect.map(
          (r): ShellResult =>
            r.exitCode === TIMED_OUT || r.timedOut ? { ...r, timedOut: true, exitCode: -1 } : r,
        ),
      )
    const notes = [
      ...(report.stopped > 0
        ? [`stopped ${report.stopped} processes the agent left running before the tests ran`]
        : []),
      ...(report.restoredCount > 0
        ? [
            `the agent had changed or deleted ${files(report.restoredCount)} under the Python site directories; the tests imported the image's own copies: ${listed(report.restored, report.restoredCount)}`,
          ]
        : []),
      ...(report.removedCount > 0
        ? [
            `the agent had added ${files(report.removedCount)} under the Python site directories; the tests did not see them: ${listed(report.removed, report.removedCount)}`,
          ]
        : []),
    ]
    return {
      sandbox: { ...sandbox, script },
      python: TOOLCHAIN_PYTHON,
      notes,
      guarded: true,
      pristineFiles: [...report.restored, ...report.removed],
    }
  })
