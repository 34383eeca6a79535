import { readFileSync } from "node:fs"
import { toJson } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { Effect, Schedule } from "effect"
import { type JobSpec, JobState, SubmitJobResponseSchema } from "../../proto/index.ts"
import {
  type GatewayCallError,
  type JobServiceClient,
  validateRequestId,
} from "../../services/gateway/index.ts"
import { parseFlags, UsageError } from "../flags.ts"
import {
  gatewayFlagSpec,
  gatewayFlagsHelp,
  gatewayTargetFrom,
  type Output,
  stdio,
  withGateway,
} from "../gateway-flags.ts"
import { contentRequestId, JobFileError, parseJobFile, specToJson } from "../job-file.ts"
import { followJob, type JobEnded, requireSuccess, type WatchOutcome } from "./watch.ts"

export const submitUsage = () => `Usage: t1 submit <job.yaml|job.json|-> [options]

Submits a job described by a file: a t1.v1.JobSpec in YAML or JSON (by the extension, else by
the content; - reads standard input) with the proto field names as keys, e.g.

  name: nightly-eval
  kind: eval                  # train | eval | rollout
  task_set: tasks/bundled/eval
  split: eval                 # train | eval; ignored when task_ids is given
  samples_per_task: 4
  limits: { max_turns: 30, wall_clock_sec: 10m, command_timeout_ms: 30s }

Examples: cli/examples/eval.yaml and cli/examples/train.yaml. The file is checked before
anything is sent, with the gateway's own rules: every problem is printed with its line and field
path (exit 1). Prints the job id.

Options:
  --watch              then follow the job like t1 watch (exit 0 only when it SUCCEEDED)
  --json               print the SubmitJobResponse as JSON (with --watch, then each event as
                       a JSON line)
  --request-id ID      idempotency key (default: sha256 of the file, so a retried submit
                       returns the same job; pass a new one to run the same file again)
  --dry-run            check the file only and print the normalised spec as JSON
${gatewayFlagsHelp}`

const spec = {
  ...gatewayFlagSpec,
  watch: { type: "boolean" },
  json: { type: "boolean" },
  "request-id": { type: "string" },
  "dry-run": { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const

const readInput = (file: string, usage: string): Buffer => {
  try {
    return readFileSync(file === "-" ? 0 : file)
  } catch (error) {
    throw new UsageError(
      `cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`,
      usage,
    )
  }
}

const RETRY_SUBMIT = new Set([grpc.status.UNAVAILABLE, grpc.status.ABORTED])

/**
 * SubmitJob with the request id, retried on UNAVAILABLE (the id makes the retry safe); prints
 * the job id, and a note when the id names a job submitted earlier.
 */
export const submitSpec = (
  client: JobServiceClient,
  jobSpec: JobSpec,
  requestId: string,
  options: { readonly output: Output; readonly json?: boolean },
) =>
  Effect.gen(function* () {
    const sentAt = Date.now()
    const response = yield* client.effect.submitJob({ spec: jobSpec, requestId }).pipe(
      Effect.retry({
        while: (e: GatewayCallError) => RETRY_SUBMIT.has(e.code),
        schedule: Schedule.exponential("250 millis"),
        times: 4,
      }),
    )
    const status = response.status
    const earlier =
      status !== undefined &&
      (status.state !== JobState.PENDING || Number(status.createdUnixMs) < sentAt - 5_000)
    if (earlier) {
      options.output.err(
        `t1: request id ${requestId} was submitted before: this is that job (${
          JobState[status.state] ?? status.state
        }); pass --request-id to submit it again`,
      )
    }
    options.output.out(
      options.json === true
        ? JSON.stringify(toJson(SubmitJobResponseSchema, response, { useProtoFieldName: true }))
        : response.jobId,
    )
    return response
  })

/** After submitting: follow the job when asked, and fail unless it succeeded. */
export const maybeFollow = (
  client: JobServiceClient,
  jobId: string,
  watch: boolean,
  options: { readonly output: Output; readonly json?: boolean },
): Effect.Effect<WatchOutcome | undefined, GatewayCallError | JobEnded> =>
  watch
    ? followJob(client, jobId, { output: options.output, json: options.json === true }).pipe(
        Effect.flatMap((outcome) => requireSuccess(jobId, outcome)),
      )
    : Effect.succeed(undefined)

export const submitCommand = (
  args: ReadonlyArray<string>,
  output: Output = stdio,
): Effect.Effect<void, unknown> | string => {
  const usage = submitUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  if (positionals.length !== 1) {
    throw new UsageError(
      positionals.length === 0
        ? "t1 submit needs a job file (YAML or JSON; - for standard input)"
        : `unexpected arguments: ${positionals.slice(1).join(" ")}`,
      usage,
    )
  }
  const file = positionals[0] ?? "-"
  const requestId = values["request-id"]
  if (requestId !== undefined) {
    const bad = validateRequestId(requestId)
    if (bad !== undefined || requestId === "") {
      throw new UsageError(`--request-id ${bad?.reason ?? "must not be empty"}`, usage)
    }
  }
  if (values["dry-run"] === true && values.watch === true) {
    throw new UsageError("--dry-run and --watch do not go together", usage)
  }
  const target = values["dry-run"] === true ? undefined : gatewayTargetFrom(values, usage)
  const bytes = readInput(file, usage)
  const name = file === "-" ? "<stdin>" : file
  const parsed = parseJobFile(bytes.toString("utf8"), name)
  if (parsed.problems.length > 0) {
    return Effect.fail(new JobFileError({ file: name, problems: parsed.problems }))
  }
  if (target === undefined) {
    return Effect.sync(() => output.out(JSON.stringify(specToJson(parsed.spec), null, 2)))
  }
  const json = values.json === true
  return withGateway(target, (client) =>
    Effect.gen(function* () {
      const { jobId } = yield* submitSpec(
        client,
        parsed.spec,
        requestId ?? contentRequestId(bytes),
        { output, json },
      )
      yield* maybeFollow(client, jobId, values.watch === true, { output, json })
    }),
  )
}
