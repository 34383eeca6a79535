import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Exit, Layer, Logger, References } from "effect"
import { choiceFlag } from "./flags.ts"

export const logFlagSpec = {
  "log-format": { type: "string" },
  "log-level": { type: "string" },
} as const

export const logFlagsHelp = `Logging:
  --log-format pretty|json|logfmt   (T1_LOG_FORMAT; default pretty)
  --log-level debug|info|warn|error (T1_LOG_LEVEL; default info)`

const LEVELS = { debug: "Debug", info: "Info", warn: "Warn", error: "Error" } as const

export const loggingLayer = (
  values: { readonly "log-format"?: string | undefined; readonly "log-level"?: string | undefined },
  usage: string,
) => {
  const format = choiceFlag(
    "log-format",
    values["log-format"] ?? process.env.T1_LOG_FORMAT,
    ["pretty", "json", "logfmt"],
    "pretty",
    usage,
  )
  const level = choiceFlag(
    "log-level",
    values["log-level"] ?? process.env.T1_LOG_LEVEL,
    ["debug", "info", "warn", "error"],
    "info",
    usage,
  )
  const logger =
    format === "json"
      ? Logger.consoleJson
      : format === "logfmt"
        ? Logger.consoleLogFmt
        : Logger.consolePretty()
  return Layer.mergeAll(
    Logger.layer([logger]),
    Layer.succeed(References.MinimumLogLevel, LEVELS[level]),
  )
}

const describeFailure = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return error instanceof Error ? error.message : String(error)
}

/**
 * Runs a command's program as the process's main fiber: SIGINT/SIGTERM interrupt it (so scoped
 * resources shut down in order) and exit 0; a failure prints one line, not a stack, and exits 1.
 */
export const runCommand = <A, E>(program: Effect.Effect<A, E>): void =>
  NodeRuntime.runMain(Effect.provideService(program, Logger.LogToStderr, true), {
    disableErrorReporting: true,
    teardown: (exit, onExit) => {
      if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return onExit(0)
      process.stderr.write(`t1: ${describeFailure(exit.cause)}\n`)
      onExit(1)
    },
  })
