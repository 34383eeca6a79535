import { spawn } from "node:child_process"
import { createInterface } from "node:readline"
import { Cause, Effect, Queue, Stream } from "effect"

export interface CommandOutcome {
  /** null when the process was killed by a signal. */
  readonly exitCode: number | null
  readonly signal: string | null
  /** The last lines it printed (stdout and stderr), for error messages. */
  readonly tail: ReadonlyArray<string>
}

type Event =
  | { readonly _tag: "line"; readonly text: string }
  | { readonly _tag: "exit"; readonly code: number | null; readonly signal: string | null }

const TAIL_LINES = 40

/**
 * Runs a program to completion, handing each output line (stdout and stderr) to `onLine` as it
 * comes. Fails only when the program cannot be started; its exit status is in the outcome.
 * Interrupting the effect kills the program.
 */
export const runCommand = (
  file: string,
  args: ReadonlyArray<string>,
  onLine: (line: string) => Effect.Effect<void>,
  options: { readonly cwd?: string } = {},
): Effect.Effect<CommandOutcome, Error> => {
  const events = Stream.callback<Event, Error>((queue) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        const child = spawn(file, [...args], {
          cwd: options.cwd,
          stdio: ["ignore", "pipe", "pipe"],
          env: { ...process.env, DEBIAN_FRONTEND: "noninteractive", LC_ALL: "C" },
        })
        let open = 2
        let exit: Event | undefined
        const finish = () => {
          if (open === 0 && exit !== undefined) {
            Queue.offerUnsafe(queue, exit)
            Queue.endUnsafe(queue)
          }
        }
        for (const output of [child.stdout, child.stderr]) {
          const lines = createInterface({ input: output, crlfDelay: Number.POSITIVE_INFINITY })
          lines.on("line", (text) => Queue.offerUnsafe(queue, { _tag: "line", text }))
          lines.on("close", () => {
            open--
            finish()
          })
        }
        child.once("error", (error) => Queue.failCauseUnsafe(queue, Cause.fail(error)))
        child.once("exit", (code, signal) => {
          exit = { _tag: "exit", code, signal }
          finish()
        })
        return child
      }),
      (child) =>
        Effect.sync(() => {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
        }),
    ),
  )
  return Effect.gen(function* () {
    const tail: string[] = []
    let outcome: CommandOutcome | undefined
    yield* Stream.runForEach(events, (event) => {
      if (event._tag === "exit") {
        outcome = { exitCode: event.code, signal: event.signal, tail }
        return Effect.void
      }
      tail.push(event.text)
      if (tail.length > TAIL_LINES) tail.shift()
      return onLine(event.text)
    })
    return outcome ?? { exitCode: null, signal: null, tail }
  })
}
