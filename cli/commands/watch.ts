import { toJson } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { Data, Effect, Result, Stream } from "effect"
import {
  type ErrorDetail,
  type EvaluationSummary,
  type JobEvent,
  JobEventSchema,
  JobState,
  type JobStatus,
  TrainPhase,
} from "../../proto/index.ts"
import {
  GatewayCallError,
  type JobServiceClient,
  validateJobId,
} from "../../services/gateway/index.ts"
import { isTerminalState } from "../../services/jobs/index.ts"
import { intFlag, parseFlags, UsageError } from "../flags.ts"
import {
  callDetails,
  gatewayFlagSpec,
  gatewayFlagsHelp,
  gatewayTargetFrom,
  type Output,
  stdio,
  withGateway,
} from "../gateway-flags.ts"

export const watchUsage = () => `Usage: t1 watch <job-id> [options]

Follows a job's events (history first, then live) until it ends: one line per event, or with
--json one protobuf JSON object per line (proto field names). A dropped stream (gateway restart,
UNAVAILABLE) is resumed from the last event seen, with backoff. Exits 0 when the job SUCCEEDED,
1 when it FAILED or was CANCELLED (the reason on stderr).

Options:
  --from-seq N       first event to show (default 1: the whole history)
  --json             one JSON object per event
  --retries N        consecutive failed reconnects before giving up (default 10, about 40 s)
${gatewayFlagsHelp}`

const spec = {
  ...gatewayFlagSpec,
  "from-seq": { type: "string" },
  json: { type: "boolean" },
  retries: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const

/** The job ended FAILED or CANCELLED (exit 1). */
export class JobEnded extends Data.TaggedError("JobEnded")<{
  readonly jobId: string
  readonly state: JobState
  readonly reason: string
}> {
  override get message(): string {
    return `job ${this.jobId} ${JobState[this.state] ?? this.state}${this.reason === "" ? "" : `: ${this.reason}`}`
  }
}

// ---- event lines ------------------------------------------------------------------------------

const pct = (x: number): string => `${(x * 100).toFixed(1)}%`
/** Four significant digits, without trailing zeros. */
const num = (x: number): string =>
  Number.isInteger(x) ? String(x) : String(Number(x.toPrecision(4)))
const stateShort = (s: JobState): string => JobState[s] ?? String(s)
const clock = (unixMs: bigint): string =>
  unixMs === 0n ? "--:--:--" : new Date(Number(unixMs)).toTimeString().slice(0, 8)

/** `pass@1 25.0%, pass@4 50.0%`, by k ascending. */
export const passAtK = (summary: EvaluationSummary): string =>
  Object.entries(summary.passAtK)
    .map(([k, v]) => [Number(k), v] as const)
    .sort((a, b) => a[0] - b[0])
    .map(([k, v]) => `pass@${k} ${pct(v)}`)
    .join(", ")

/** `2 unverifiable (missing: numpy, requests)`: episodes the verifier could not score. */
export const unverifiableNote = (count: number, missing: ReadonlyArray<string>): string =>
  `${count} unverifiable${missing.length === 0 ? "" : ` (missing: ${missing.join(", ")})`}`

/** The packages an evaluation's unverifiable episodes reported missing, over all its tasks. */
export const evaluationMissing = (summary: EvaluationSummary): string[] =>
  [...new Set(summary.perTask.flatMap((t) => t.missingPackages))].sort()

/** One human line for an event: `#3 12:00:01 episode e1 (task-a): reward 2, resolved, 7 turns`. */
export const describeEvent = (event: JobEvent): string => {
  const prefix = `#${event.seq} ${clock(event.unixMs)}`
  const e = event.event
  switch (e.case) {
    case "admitted":
      return `${prefix} admitted: ${e.value.episodesTotal} episodes over ${e.value.tasks} tasks`
    case "episodeFinished": {
      const v = e.value
      const task = v.taskId === "" ? "" : ` (${v.taskId})`
      if (v.infraFailed) {
        return `${prefix} episode ${v.episodeId}${task}: failed, infra failure on each of ${v.attempt} attempts`
      }
      if (v.unverifiable) {
        const missing =
          v.missingPackages.length === 0 ? "" : ` (missing: ${v.missingPackages.join(", ")})`
        return `${prefix} episode ${v.episodeId}${task}: unverifiable${missing}, not scored, ${v.turns} turns${
          v.attempt > 1 ? `, attempt ${v.attempt}` : ""
        }`
      }
      return `${prefix} episode ${v.episodeId}${task}: reward ${num(v.reward)}, ${
        v.resolved ? "resolved" : "unresolved"
      }, ${v.turns} turns${v.attempt > 1 ? `, attempt ${v.attempt}` : ""}`
    }
    case "learnerStep": {
      const v = e.value
      const phase = (TrainPhase[v.phase] ?? "").toLowerCase().replace("unspecified", "")
      const parts = [
        `reward ${num(v.rewardMean)}`,
        `resolved ${pct(v.resolvedRate)}`,
        `policy loss ${num(v.policyLoss)}`,
        `value loss ${num(v.valueLoss)}`,
        `entropy ${num(v.entropy)}`,
        `clipfrac ${num(v.clipfrac)}`,
        `|Δlogp| ${num(v.trainInferLogprobAbsDiff)}`,
        `${v.trajectories} trajectories`,
      ]
      return `${prefix} learner step ${v.step}${phase === "" ? "" : ` ${phase}`} → v${v.policyVersion}: ${parts.join(", ")}`
    }
    case "evaluation": {
      const v = e.value
      const k = passAtK(v)
      const excluded =
        v.unverifiable > 0 ? `, ${unverifiableNote(v.unverifiable, evaluationMissing(v))}` : ""
      return `${prefix} evaluation of v${v.policyVersion}: resolved ${pct(v.resolvedRate)} over ${
        v.episodes
      } episodes (${v.tasks} tasks)${k === "" ? "" : `, ${k}`}, reward ${num(v.rewardMean)}${excluded}`
    }
    case "stateChanged": {
      const v = e.value
      const from =
        v.previousState === JobState.UNSPECIFIED ? "" : `${stateShort(v.previousState)} → `
      const why = v.error?.message ? `: ${v.error.message}` : ""
      return `${prefix} state ${from}${stateShort(v.state)}${why}`
    }
    default:
      return `${prefix} (event of a newer kind)`
  }
}

export const eventJson = (event: JobEvent): string =>
  JSON.stringify(toJson(JobEventSchema, event, { useProtoFieldName: true }))

// ---- following a job --------------------------------------------------------------------------

export interface FollowOptions {
  readonly fromSeq?: bigint
  readonly json?: boolean
  readonly output: Output
  /** Consecutive failed reconnects before giving up; default 10. */
  readonly retries?: number
  /** First backoff delay, doubled each retry up to 5 s; default 250 ms. */
  readonly backoffMs?: number
}

export interface WatchOutcome {
  readonly state: JobState
  /** Why the job failed or was cancelled. */
  readonly error: ErrorDetail | undefined
  /** The job's last EvaluationSummary event seen, if any. */
  readonly evaluation: EvaluationSummary | undefined
  /** The job's status after its end, when the gateway answered. */
  readonly status: JobStatus | undefined
  readonly lastSeq: bigint
}

const RETRYABLE = new Set([grpc.status.UNAVAILABLE, grpc.status.ABORTED])

/**
 * Prints a job's events from `fromSeq` until its terminal one, resuming after dropped streams
 * from the last seq seen; duplicate events are skipped, missing ones reported on stderr.
 */
export const followJob = (
  client: JobServiceClient,
  jobId: string,
  options: FollowOptions,
): Effect.Effect<WatchOutcome, GatewayCallError> =>
  Effect.gen(function* () {
    const { output } = options
    const retries = options.retries ?? 10
    const backoffMs = options.backoffMs ?? 250
    let next = options.fromSeq !== undefined && options.fromSeq > 0n ? options.fromSeq : 1n
    let terminal: JobState | undefined
    let error: ErrorDetail | undefined
    let evaluation: EvaluationSummary | undefined
    let failures = 0
    // The job exists and the gateway answers (NOT_FOUND, UNAUTHENTICATED, a wrong address fail
    // here at once); from now on a lost stream is resumed.
    yield* client.effect.getJob({ jobId })
    const onEvent = (event: JobEvent) =>
      Effect.sync(() => {
        if (event.seq < next) return
        if (event.seq > next) {
          output.err(
            `t1: job ${jobId}: events ${next}..${event.seq - 1n} are missing (no longer stored)`,
          )
        }
        next = event.seq + 1n
        failures = 0
        output.out(options.json === true ? eventJson(event) : describeEvent(event))
        const e = event.event
        if (e.case === "evaluation") evaluation = e.value
        if (e.case === "stateChanged" && isTerminalState(e.value.state)) {
          terminal = e.value.state
          error = e.value.error
        }
      })
    while (terminal === undefined) {
      const streamed = yield* client.effect
        .watchJob({ jobId, fromSeq: next })
        .pipe(Stream.runForEach(onEvent), Effect.result)
      if (terminal !== undefined) break
      let lost: GatewayCallError
      if (Result.isFailure(streamed)) {
        if (!RETRYABLE.has(streamed.failure.code)) return yield* Effect.fail(streamed.failure)
        lost = streamed.failure
      } else {
        // The stream ended without the terminal event: the job may have ended before `next`
        // (watching from past its last event), or the gateway closed the stream.
        const got = yield* Effect.result(client.effect.getJob({ jobId }))
        if (Result.isFailure(got) && !RETRYABLE.has(got.failure.code)) {
          return yield* Effect.fail(got.failure)
        }
        const status = Result.isSuccess(got) ? got.success.status : undefined
        if (status !== undefined && isTerminalState(status.state)) {
          terminal = status.state
          error = status.error
          break
        }
        lost = Result.isFailure(got)
          ? got.failure
          : new GatewayCallError({
              code: grpc.status.UNAVAILABLE,
              details: "the event stream ended before the job did",
              fieldPaths: [],
              detail: undefined,
            })
      }
      failures++
      if (failures > retries) return yield* Effect.fail(lost)
      const delay = Math.round(
        Math.min(5_000, backoffMs * 2 ** (failures - 1)) * (0.8 + 0.4 * Math.random()),
      )
      output.err(
        `t1: job ${jobId}: ${lost.codeName}: ${callDetails(lost)}; resuming from event ${next} in ${delay} ms (retry ${failures} of ${retries})`,
      )
      yield* Effect.sleep(delay)
    }
    const final = yield* Effect.result(client.effect.getJob({ jobId }))
    const status = Result.isSuccess(final) ? final.success.status : undefined
    return {
      state: terminal,
      error: error ?? status?.error,
      evaluation,
      status,
      lastSeq: next - 1n,
    }
  })

/** Succeeds for a SUCCEEDED job; fails with {@link JobEnded} otherwise. */
export const requireSuccess = (
  jobId: string,
  outcome: WatchOutcome,
): Effect.Effect<WatchOutcome, JobEnded> =>
  outcome.state === JobState.SUCCEEDED
    ? Effect.succeed(outcome)
    : Effect.fail(
        new JobEnded({
          jobId,
          state: outcome.state,
          reason: outcome.error?.message ?? "",
        }),
      )

/** A job id argument, checked the way the gateway checks it. */
export const jobIdArgument = (
  positionals: ReadonlyArray<string>,
  usage: string,
  command: string,
): string => {
  if (positionals.length !== 1) {
    throw new UsageError(
      positionals.length === 0
        ? `t1 ${command} needs a job id`
        : `unexpected arguments: ${positionals.slice(1).join(" ")}`,
      usage,
    )
  }
  const jobId = positionals[0] ?? ""
  const bad = validateJobId(jobId)
  if (bad !== undefined) throw new UsageError(`job id ${bad.reason}`, usage)
  return jobId
}

export const watchCommand = (
  args: ReadonlyArray<string>,
  output: Output = stdio,
): Effect.Effect<void, unknown> | string => {
  const usage = watchUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  const jobId = jobIdArgument(positionals, usage, "watch")
  const fromSeq = BigInt(intFlag("from-seq", values["from-seq"], 1, usage, 1))
  const retries = intFlag("retries", values.retries, 10, usage)
  const target = gatewayTargetFrom(values, usage)
  return withGateway(target, (client) =>
    followJob(client, jobId, { fromSeq, json: values.json === true, output, retries }).pipe(
      Effect.flatMap((outcome) => requireSuccess(jobId, outcome)),
      Effect.asVoid,
    ),
  )
}
