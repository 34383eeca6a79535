import { Clock, Deferred, Effect, Option, Schedule, Semaphore } from "effect"
import type { ExecOptions, ExecResult } from "../driver.ts"
import { InvalidCommand, type SandboxError, SandboxInfraError, SandboxNotFound } from "../errors.ts"
import { CappedOutput } from "./capped-output.ts"
import {
  commandFrame,
  FrameScanner,
  interruptFrame,
  type Marker,
  newMarker,
  prologue,
} from "./framing.ts"
import type { ShellProcess, StartShell } from "./process.ts"

export interface ShellSessionOptions {
  /** Starts bash. A rejection with a SandboxError (say SandboxDied) is passed on as that error. */
  readonly startShell: StartShell
  /** The sandbox this shell belongs to, for errors. */
  readonly id: string
  /**
   * After a timeout's SIGINT, how long the foreground job has to end before the shell's process
   * group is killed and a fresh shell started. Default 2000.
   */
  readonly interruptGraceMs?: number
  /** How long a fresh shell has to answer its prologue. Default 10000. */
  readonly startTimeoutMs?: number
  /**
   * Output that background jobs write between commands is kept up to this and shown with the
   * next command's output, as a terminal would. Default 64 KiB.
   */
  readonly strayOutputBytes?: number
}

/** One long-lived bash: cwd, variables, functions and background jobs persist across commands. */
export interface ShellSession {
  /** Runs one command; commands run one at a time, in the order they were called. */
  readonly exec: (command: string, options: ExecOptions) => Effect.Effect<ExecResult, SandboxError>
  /** Kills the shell's process group; later execs fail with SandboxNotFound. Idempotent. */
  readonly close: Effect.Effect<void>
}

/** The status reported for a command whose shell died or was killed under it. */
export const SHELL_DIED = -1
/** The status bash reports for a job ended by SIGINT. */
export const INTERRUPTED = 130

/** One bash process and where its output goes right now. */
interface Shell {
  readonly process: ShellProcess
  /** bash's pid, which is also its process group (it was started through setsid). */
  readonly pgid: number
  /** bash's private copy of the output pipe; commands and trailers write there. */
  readonly fd: number
  /** Completed with a reason once the process is gone. */
  readonly exited: Deferred.Deferred<string>
  /** Output of background jobs between commands. */
  stray: CappedOutput
  consume: (chunk: Uint8Array) => void
}

type Outcome =
  | { readonly _tag: "ended"; readonly code: number }
  | { readonly _tag: "died"; readonly reason: string }

/** Every SandboxError is a tagged value with an errorClass (see errors.ts). */
export const isSandboxError = (u: unknown): u is SandboxError =>
  typeof u === "object" &&
  u !== null &&
  "_tag" in u &&
  typeof u._tag === "string" &&
  "errorClass" in u &&
  (u.errorClass === "infra" || u.errorClass === "task")

const asSandboxError = (cause: unknown, operation: string): SandboxError =>
  isSandboxError(cause)
    ? cause
    : new SandboxInfraError({
        operation,
        reason: cause instanceof Error ? cause.message : String(cause),
      })

const encoder = new TextEncoder()

/** Checks a command and its options before anything is sent to bash. */
const validate = (
  command: string,
  options: ExecOptions,
): Effect.Effect<Uint8Array, InvalidCommand> => {
  if (command.includes("\0"))
    return Effect.fail(new InvalidCommand({ reason: "the command contains a NUL byte" }))
  if (!(Number.isFinite(options.timeoutMs) && options.timeoutMs > 0))
    return Effect.fail(
      new InvalidCommand({ reason: `timeoutMs must be > 0, got ${options.timeoutMs}` }),
    )
  if (!(Number.isInteger(options.maxOutputBytes) && options.maxOutputBytes >= 0))
    return Effect.fail(
      new InvalidCommand({
        reason: `maxOutputBytes must be an integer >= 0, got ${options.maxOutputBytes}`,
      }),
    )
  return Effect.succeed(encoder.encode(command))
}

/**
 * Starts a shell through `startShell` and returns a session over it. The session speaks only
 * through ShellProcess, so any transport (a local child process, a docker exec) can carry it.
 */
export const openShellSession = (
  options: ShellSessionOptions,
): Effect.Effect<ShellSession, SandboxError> =>
  Effect.gen(function* () {
    const graceMs = options.interruptGraceMs ?? 2000
    const startTimeoutMs = options.startTimeoutMs ?? 10_000
    const strayBytes = options.strayOutputBytes ?? 64 * 1024
    const lock = yield* Semaphore.make(1)
    let closed = false
    let current: Shell | undefined

    const write = (shell: Shell, text: string) =>
      Effect.tryPromise({
        try: () => shell.process.write(encoder.encode(text)),
        catch: (cause) => asSandboxError(cause, "write to shell"),
      })

    /**
     * SIGKILLs the shell's process group (its foreground and background jobs) and frees it; a
     * transport that does not answer is left behind after a few seconds rather than waited on.
     */
    const kill = (shell: Shell) =>
      Effect.promise(async () => {
        await shell.process.signal(shell.pgid, "KILL").catch(() => undefined)
        await shell.process.close().catch(() => undefined)
      }).pipe(Effect.timeoutOption("5 seconds"), Effect.asVoid)

    const awaitOutcome = (shell: Shell, end: Deferred.Deferred<number>, ms: number) =>
      Effect.raceFirst(
        Effect.map(Deferred.await(end), (code): Outcome => ({ _tag: "ended", code })),
        Effect.map(Deferred.await(shell.exited), (reason): Outcome => ({ _tag: "died", reason })),
      ).pipe(Effect.timeoutOption(ms))

    const spawn: Effect.Effect<Shell, SandboxError> = Effect.gen(function* () {
      const process = yield* Effect.tryPromise({
        try: () => options.startShell(),
        catch: (cause) => asSandboxError(cause, "start shell"),
      })
      const exited = Deferred.makeUnsafe<string>()
      const ready = Deferred.makeUnsafe<number>()
      const marker = newMarker()
      const scanner = new FrameScanner([marker.needle])
      let values: ReadonlyArray<number> = []
      // Until the ready trailer, output (a login banner, warnings) is dropped.
      let consume = (chunk: Uint8Array) => {
        const rest = scanner.feed(chunk, {
          content: () => undefined,
          trailer: (_, v) => {
            values = v
            return true
          },
        })
        if (rest !== undefined) {
          consume = () => undefined
          Deferred.doneUnsafe(ready, Effect.succeed(0))
        }
      }
      process.onOutput((chunk) => consume(chunk))
      process.onExit((reason) => Deferred.doneUnsafe(exited, Effect.succeed(reason)))
      const failed = (reason: string) =>
        Effect.andThen(
          Effect.promise(() => process.close().catch(() => undefined)),
          Effect.fail(new SandboxInfraError({ operation: "start shell", reason })),
        )
      const written = yield* Effect.exit(
        Effect.tryPromise(() => process.write(encoder.encode(prologue(marker)))),
      )
      if (written._tag === "Failure") return yield* failed("the shell's stdin is closed")
      const started = yield* Effect.raceFirst(
        Effect.map(Deferred.await(ready), (): Outcome => ({ _tag: "ended", code: 0 })),
        Effect.map(Deferred.await(exited), (reason): Outcome => ({ _tag: "died", reason })),
      ).pipe(Effect.timeoutOption(startTimeoutMs))
      if (Option.isNone(started))
        return yield* failed(`bash did not answer within ${startTimeoutMs} ms`)
      if (started.value._tag === "died")
        return yield* failed(`bash exited while starting: ${started.value.reason}`)
      const [pgid, fd] = values
      if (pgid === undefined || fd === undefined || !(pgid > 1) || !(fd > 2))
        return yield* failed(`bash's prologue answered ${JSON.stringify(values)}`)
      const shell: Shell = {
        process,
        pgid,
        fd,
        exited,
        stray: new CappedOutput(strayBytes),
        consume: () => undefined,
      }
      const idle = (chunk: Uint8Array) => shell.stray.append(chunk)
      shell.consume = idle
      consume = (chunk) => shell.consume(chunk)
      return shell
    })

    /** Ends `old` (if any) and starts a fresh shell, unless the session was closed. */
    const restart = (old: Shell | undefined) =>
      Effect.gen(function* () {
        current = undefined
        if (old !== undefined) yield* kill(old)
        if (closed) return yield* new SandboxNotFound({ id: options.id })
        // After a fork bomb the killed processes take a moment to go, and until then the pids
        // limit can refuse the new bash itself (exit 126): a replacement is retried briefly.
        const shell = yield* spawn.pipe(
          Effect.retry({
            while: (e) =>
              old !== undefined &&
              e._tag === "SandboxInfraError" &&
              e.reason.startsWith("bash exited while starting"),
            schedule: Schedule.exponential("100 millis"),
            times: 5,
          }),
        )
        if (closed) {
          yield* kill(shell)
          return yield* new SandboxNotFound({ id: options.id })
        }
        current = shell
        return shell
      })

    const turn = (command: Uint8Array, execOptions: ExecOptions) =>
      Effect.gen(function* () {
        const startedAt = yield* Clock.currentTimeMillis
        if (closed) return yield* new SandboxNotFound({ id: options.id })
        let restarted = false
        let shell = current
        if (shell === undefined || Deferred.isDoneUnsafe(shell.exited)) {
          shell = yield* restart(shell)
          restarted = true
        }
        const active = shell

        const output = new CappedOutput(execOptions.maxOutputBytes)
        output.append(active.stray.bytes())
        active.stray = new CappedOutput(strayBytes)

        const end: Marker = newMarker()
        const sync: Marker = newMarker()
        const ended = Deferred.makeUnsafe<number>()
        const scanner = new FrameScanner([end.needle, sync.needle])
        let interrupted = false
        let status: number | undefined
        const idle = (chunk: Uint8Array) => active.stray.append(chunk)
        const finish = (code: number) => {
          active.consume = idle
          Deferred.doneUnsafe(ended, Effect.succeed(code))
          return true
        }
        active.consume = (chunk) => {
          const rest = scanner.feed(chunk, {
            content: (bytes) => output.append(bytes),
            trailer: (index, values) => {
              if (index === 0) {
                status = values[0] ?? SHELL_DIED
                // After an interrupt, the sync trailer is still to come; wait for it.
                return interrupted ? false : finish(status)
              }
              return finish(status ?? INTERRUPTED)
            },
          })
          if (rest !== undefined && rest.length > 0) idle(rest)
        }

        const result = (exitCode: number, timedOut: boolean, sessionRestarted: boolean) =>
          Effect.map(
            Clock.currentTimeMillis,
            (now) =>
              ({
                output: output.bytes(),
                exitCode,
                timedOut,
                truncated: output.truncated,
                totalBytes: output.totalBytes,
                sessionRestarted,
                durationMs: now - startedAt,
              }) satisfies ExecResult,
          )

        // The write counts against the timeout too: a transport that stops taking input must
        // not hold the exec past it.
        const sent = yield* Effect.exit(
          write(active, commandFrame(command, end, active.fd)).pipe(
            Effect.timeoutOption(execOptions.timeoutMs),
          ),
        )
        let outcome: Option.Option<Outcome> = Option.some({
          _tag: "died",
          reason: "the shell's stdin is closed",
        })
        if (sent._tag === "Success" && Option.isSome(sent.value)) {
          const spent = (yield* Clock.currentTimeMillis) - startedAt
          const left = Math.max(0, execOptions.timeoutMs - spent)
          outcome = yield* awaitOutcome(active, ended, left)
        } else if (sent._tag === "Success") {
          outcome = Option.none()
        }
        // The trailer may have landed while this fiber was between steps: check and commit to
        // interrupting in one step, so a trailer seen afterwards waits for the sync trailer.
        const late = yield* Effect.sync(() => {
          if (Option.isSome(outcome) || Deferred.isDoneUnsafe(ended)) return true
          interrupted = true
          return false
        })
        if (late && Option.isNone(outcome))
          outcome = Option.some({ _tag: "ended", code: yield* Deferred.await(ended) })
        const timedOut = interrupted
        if (interrupted) {
          // Like Ctrl-C: the foreground job gets SIGINT; background jobs ignore it; bash survives.
          yield* Effect.promise(() =>
            active.process.signal(active.pgid, "INT").catch(() => undefined),
          )
          yield* Effect.ignore(
            write(active, interruptFrame(sync, active.fd)).pipe(Effect.timeoutOption(graceMs)),
          )
          outcome = yield* awaitOutcome(active, ended, graceMs)
        }
        if (Option.isSome(outcome) && outcome.value._tag === "ended")
          return yield* result(outcome.value.code, timedOut, restarted)
        // The shell died under the command, or its foreground job ignored the interrupt.
        output.append(scanner.drain())
        yield* restart(active)
        return yield* result(SHELL_DIED, timedOut, true)
      }).pipe(
        // An exec abandoned half-way leaves bash busy with a command nobody waits for: end it,
        // so the next exec starts a fresh shell and says so.
        Effect.onInterrupt(() =>
          Effect.suspend(() => {
            const shell = current
            current = undefined
            return shell === undefined ? Effect.void : kill(shell)
          }),
        ),
      )

    current = yield* spawn
    return {
      exec: (command, execOptions) =>
        Effect.flatMap(validate(command, execOptions), (bytes) =>
          lock.withPermits(1)(turn(bytes, execOptions)),
        ),
      close: Effect.suspend(() => {
        closed = true
        const shell = current
        current = undefined
        return shell === undefined ? Effect.void : kill(shell)
      }),
    } satisfies ShellSession
  })
