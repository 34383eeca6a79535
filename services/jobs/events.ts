/**
 * Where job events live and what they say, defined once for every writer and reader of jobs
 * (the gateway's job store, the coordinator, watchers, tests): the event stream, its subjects
 * and message ids, and which states end a job.
 */
import { Effect } from "effect"
import { ErrorCode, type JobEvent, JobState, type JobStatus } from "../../proto/index.ts"
import type { BusError, BusShape, Subjects } from "../bus/index.ts"

export const TERMINAL_STATES: ReadonlyArray<JobState> = [
  JobState.SUCCEEDED,
  JobState.FAILED,
  JobState.CANCELLED,
]

export const isTerminalState = (state: JobState): boolean => TERMINAL_STATES.includes(state)

/** The event that moves a job into a terminal state: a watch ends after it. */
export const isTerminalEvent = (event: JobEvent): boolean =>
  event.event.case === "stateChanged" && isTerminalState(event.event.value.state)

/**
 * A cancel request: JobState has no "cancelling" value, so CancelJob marks a job that is not
 * terminal with `error.code = ERROR_CODE_CANCELLED` (the message is the caller's reason) and
 * leaves its state; the coordinator then stops admitting, lets in-flight episodes end (or waits
 * out a grace period) and moves the job to JOB_STATE_CANCELLED itself.
 */
export const isCancelRequested = (status: JobStatus): boolean =>
  !isTerminalState(status.state) && status.error?.code === ErrorCode.CANCELLED

/** JetStream stream of every job's events (dots are not allowed in stream names). */
export const jobEventsStream = (subjects: Subjects): string =>
  `${subjects.prefix.toUpperCase().replace(/[^A-Z0-9]/g, "_")}_JOB_EVENTS`

/** Every job's event subject (`<prefix>.jobs.*.events`), bound to {@link jobEventsStream}. */
export const allJobEvents = (subjects: Subjects): string => `${subjects.prefix}.jobs.*.events`

/** Nats-Msg-Id of a job's event: the claim on its seq. */
export const jobEventMsgId = (jobId: string, seq: bigint | number): string => `${jobId}:${seq}`

/** The larger of two event seqs (bigints, which Math.max does not take). */
export const laterSeq = (a: bigint, b: bigint): bigint => (a > b ? a : b)

/** Duplicate window of the event stream: a seq is claimed within it. */
export const EVENT_DUPLICATE_WINDOW_MS = 60 * 60_000

/**
 * Creates the job event stream, or brings an existing one to this configuration. Should another
 * stream under another name already hold the subjects, NATS refuses the overlap and that stream
 * is used.
 */
export const ensureJobEventsStream = (
  bus: BusShape,
  subjects: Subjects,
): Effect.Effect<void, BusError> =>
  bus
    .ensureStream({
      name: jobEventsStream(subjects),
      subjects: [allJobEvents(subjects)],
      retention: "limits",
      storage: "file",
      duplicateWindowMs: EVENT_DUPLICATE_WINDOW_MS,
    })
    .pipe(
      Effect.catchTag("JetStreamError", (e) =>
        /overlap/i.test(e.reason) ? Effect.void : Effect.fail(e),
      ),
    )
