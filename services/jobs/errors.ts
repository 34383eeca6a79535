/**
 * What can go wrong with a job request or the job store, shared by the store's readers and
 * writers (gateway, coordinator, pools, CLI); the gateway maps each tag to a gRPC status.
 */
import { Data } from "effect"
import { JobState } from "../../proto/index.ts"

/** One problem with a request, named by its dotted proto field path (`spec.learner.clip_eps`). */
export interface Violation {
  readonly fieldPath: string
  readonly reason: string
}

/** Request fields are malformed or out of range; paths use proto field names. */
export class InvalidArgument extends Data.TaggedError("InvalidArgument")<{
  readonly violations: ReadonlyArray<Violation>
}> {
  static of(fieldPath: string, reason: string): InvalidArgument {
    return new InvalidArgument({ violations: [{ fieldPath, reason }] })
  }
  /** The first offending field. */
  get fieldPath(): string {
    return this.violations[0]?.fieldPath ?? ""
  }
  override get message(): string {
    return this.violations.map((v) => `${v.fieldPath}: ${v.reason}`).join("; ")
  }
}

/** `JOB_STATE_CANCELLED` for JobState.CANCELLED. */
export const stateName = (state: JobState): string =>
  JobState[state] === undefined ? String(state) : `JOB_STATE_${JobState[state]}`

export class JobNotFound extends Data.TaggedError("JobNotFound")<{ readonly jobId: string }> {
  override get message(): string {
    return `job ${this.jobId} not found`
  }
}

/** A submission reused a request_id with a different spec. */
export class JobAlreadyExists extends Data.TaggedError("JobAlreadyExists")<{
  readonly jobId: string
  readonly requestId: string
}> {
  override get message(): string {
    return `request_id ${JSON.stringify(this.requestId)} already submitted job ${this.jobId} with a different spec`
  }
}

/** The job is SUCCEEDED, FAILED or CANCELLED: its state can no longer change. */
export class JobTerminal extends Data.TaggedError("JobTerminal")<{
  readonly jobId: string
  readonly state: JobState
}> {
  override get message(): string {
    return `job ${this.jobId} is already ${stateName(this.state)}`
  }
}

/** A stored job or event does not decode: written by something else, or corrupted. */
export class JobCorrupt extends Data.TaggedError("JobCorrupt")<{
  readonly key: string
  readonly reason: string
}> {
  override get message(): string {
    return `stored job data ${this.key} does not decode: ${this.reason}`
  }
}

/** A compare-and-set kept losing against concurrent writers. */
export class JobContended extends Data.TaggedError("JobContended")<{
  readonly jobId: string
  readonly attempts: number
}> {
  override get message(): string {
    return `job ${this.jobId}: gave up after ${this.attempts} conflicting concurrent updates`
  }
}
