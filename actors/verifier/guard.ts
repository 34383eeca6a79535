import { Effect } from "effect"
import {
  TOOLCHAIN_BASH,
  TOOLCHAIN_BIN,
  TOOLCHAIN_PYTHON,
  TOOLCHAIN_REAP,
  TOOLCHAIN_TIMEOUT,
} from "../sandbox/index.ts"
import { VerifierInfraError } from "./errors.ts"
import type { ShellResult, VerifierSandboxShape } from "./port.ts"

/** How one verification runs its commands. */
export interface Guarded {
  readonly sandbox: VerifierSandboxShape
  /** The interpreter that runs pytest; undefined: the sandbox's own `python3`. */
  readonly python: string | undefined
  readonly notes: ReadonlyArray<string>
}

/** The reaper's own budget; it ends in well under a second unless something fork-bombs. */
const REAP_TIMEOUT_SEC = 30

/** Seconds `timeout` gives a command that ignores SIGTERM before it sends SIGKILL. */
const KILL_AFTER_SEC = 2

/** timeout(1)'s exit status when the command ran out of time. */
const TIMED_OUT = 124

/**
 * argv running `script` in the toolchain's bash, its tools first on PATH, stopped at `timeoutMs`.
 * `-p`: no BASH_ENV, no functions from the environment; the environment is the container's own
 * (the image's), nothing the agent exported.
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
  `PATH=${TOOLCHAIN_BIN}:\${PATH:-/usr/local/bin:/usr/bin:/bin}\n${script}`,
]

const FALLBACK =
  "verified with the sandbox's own shell and Python, which the agent could have replaced"

/**
 * Prepares a sandbox for a verification the agent cannot forge: every process the agent left is
 * stopped (the reaper: nothing can rewrite the tests or the answer while the tests run), and
 * every command from then on runs outside the agent's shell, with the read-only toolchain's bash,
 * tools and Python (see actors/sandbox/toolchain). A sandbox that cannot (a driver without
 * separate processes, a sandbox created without the toolchain) is verified as before, and every
 * outcome says so in its notes.
 */
export const guard = (sandbox: VerifierSandboxShape): Effect.Effect<Guarded, VerifierInfraError> =>
  Effect.gen(function* () {
    const execArgv = sandbox.execArgv
    if (execArgv === undefined)
      return {
        sandbox,
        python: undefined,
        notes: [`${FALLBACK}: its driver runs commands only in the agent's shell`],
      }
    const reaped = yield* execArgv([TOOLCHAIN_TIMEOUT, `${REAP_TIMEOUT_SEC}`, TOOLCHAIN_REAP], {
      timeoutMs: (REAP_TIMEOUT_SEC + 10) * 1000,
      maxOutputBytes: 4096,
    }).pipe(
      Effect.map((r) => ({ ok: true as const, result: r })),
      Effect.catch((e) =>
        e.infra
          ? Effect.fail(
              new VerifierInfraError({
                stage: "stopping the agent's processes",
                reason: e.message,
                retryable: true,
              }),
            )
          : Effect.succeed({ ok: false as const, reason: e.reason }),
      ),
    )
    if (!reaped.ok)
      return {
        sandbox,
        python: undefined,
        notes: [`${FALLBACK}: ${reaped.reason}`],
      }
    const text = new TextDecoder().decode(reaped.result.output)
    const counted = /killed=(\d+) rounds=(\d+)/.exec(text)
    if (counted === null) {
      // No toolchain in this sandbox (the exec could not start the reaper): the old way.
      if (
        reaped.result.exitCode === 126 ||
        reaped.result.exitCode === 127 ||
        /no such file/i.test(text)
      )
        return {
          sandbox,
          python: undefined,
          notes: [`${FALLBACK}: the sandbox has no verifier toolchain`],
        }
      return yield* new VerifierInfraError({
        stage: "stopping the agent's processes",
        reason: `the reaper exited ${reaped.result.exitCode}: ${text.slice(-500).trim()}`,
        retryable: false,
      })
    }
    const killed = Number(counted[1])
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
    return {
      sandbox: { ...sandbox, script },
      python: TOOLCHAIN_PYTHON,
      notes:
        killed > 0
          ? [`stopped ${killed} processes the agent left running before the tests ran`]
          : [],
    }
  })
