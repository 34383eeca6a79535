import { Cause, Duration, Effect, Exit, Option } from "effect"

export type HealthVerdict =
  | { readonly healthy: true }
  | { readonly healthy: false; readonly reason: string }

const reasonOf = (cause: Cause.Cause<unknown>): string => {
  if (Cause.hasInterruptsOnly(cause)) return "health check interrupted"
  const error = Cause.squash(cause)
  return error instanceof Error ? error.message : String(error)
}

/**
 * Runs a health check to a verdict that never fails: a failure, a defect, `false` or running past
 * `timeout` all become unhealthy with a reason, since a probe must always get an answer.
 */
export const judgeHealth = <R>(
  check: Effect.Effect<boolean, unknown, R>,
  timeout: Duration.Input,
): Effect.Effect<HealthVerdict, never, R> =>
  check.pipe(
    Effect.timeoutOption(timeout),
    Effect.exit,
    Effect.map((exit): HealthVerdict => {
      if (Exit.isFailure(exit)) return { healthy: false, reason: reasonOf(exit.cause) }
      if (Option.isNone(exit.value)) {
        return {
          healthy: false,
          reason: `health check timed out after ${Duration.format(Duration.fromInputUnsafe(timeout))}`,
        }
      }
      return exit.value.value
        ? { healthy: true }
        : { healthy: false, reason: "health check returned false" }
    }),
  )
