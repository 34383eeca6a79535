import { Effect } from "effect"
import { JobState } from "../../proto/index.ts"
import { parseFlags, UsageError } from "../flags.ts"
import {
  gatewayFlagSpec,
  gatewayFlagsHelp,
  gatewayTargetFrom,
  type Output,
  stdio,
  withGateway,
} from "../gateway-flags.ts"
import { jobIdArgument } from "./watch.ts"

export const cancelUsage = () => `Usage: t1 cancel <job-id> [options]

Cancels a job that has not ended. A PENDING job is CANCELLED at once; for a RUNNING one this is a
request to the coordinator, which stops issuing episodes and then moves the job to CANCELLED
(t1 watch <job-id> shows when). Cancelling a job that has already ended fails
(FAILED_PRECONDITION, exit 1).

Options:
  --reason TEXT      recorded in the job's state_changed event
${gatewayFlagsHelp}`

const spec = {
  ...gatewayFlagSpec,
  reason: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const

export const cancelCommand = (
  args: ReadonlyArray<string>,
  output: Output = stdio,
): Effect.Effect<void, unknown> | string => {
  const usage = cancelUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  const jobId = jobIdArgument(positionals, usage, "cancel")
  const reason = values.reason ?? ""
  if (reason.length > 1024) throw new UsageError("--reason must be at most 1024 characters", usage)
  const target = gatewayTargetFrom(values, usage)
  return withGateway(target, (client) =>
    Effect.gen(function* () {
      const { status } = yield* client.effect.cancelJob({ jobId, reason })
      const state = status?.state ?? JobState.UNSPECIFIED
      output.out(
        state === JobState.CANCELLED
          ? `${jobId} CANCELLED`
          : `${jobId} cancel requested (${JobState[state] ?? state}); the coordinator stops it`,
      )
    }),
  )
}
