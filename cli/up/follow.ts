/**
 * One job of `t1 up`, as any client runs one: SubmitJob, WatchJob to its terminal event (each
 * event to `onEvent`), GetJob. A job that does not succeed fails the run with its error.
 */

import type { MessageInitShape } from "@bufbuild/protobuf"
import { Data, Effect, Stream } from "effect"
import {
  type JobEvent,
  JobState,
  type JobStatus,
  type SubmitJobRequestSchema,
} from "../../proto/index.ts"
import type { GatewayCallError, JobServiceClient } from "../../services/gateway/index.ts"

export class UpJobFailed extends Data.TaggedError("UpJobFailed")<{
  readonly name: string
  readonly jobId: string
  readonly state: string
  readonly reason: string
}> {
  override get message() {
    return `t1 up: job ${this.name} (${this.jobId}) ended ${this.state}: ${this.reason}`
  }
}

export const followJob = (
  client: JobServiceClient,
  request: MessageInitShape<typeof SubmitJobRequestSchema>,
  onEvent: (event: JobEvent) => void,
): Effect.Effect<JobStatus, GatewayCallError | UpJobFailed> =>
  Effect.gen(function* () {
    const { jobId } = yield* client.effect.submitJob(request)
    yield* Stream.runForEach(client.effect.watchJob({ jobId, fromSeq: 1n }), (e) =>
      Effect.sync(() => onEvent(e)),
    )
    const { status } = yield* client.effect.getJob({ jobId })
    const name = request.spec?.name ?? jobId
    if (status === undefined || status.state !== JobState.SUCCEEDED)
      return yield* new UpJobFailed({
        name,
        jobId,
        state: status === undefined ? "without a status" : (JobState[status.state] ?? "?"),
        reason: status?.error?.message || "no error recorded",
      })
    return status
  })
