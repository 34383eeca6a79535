import { create } from "@bufbuild/protobuf"
import { Effect, Stream } from "effect"
import {
  CancelJobResponseSchema,
  GetJobResponseSchema,
  type JobService,
  JobState,
  ListJobsResponseSchema,
  SubmitJobResponseSchema,
  WatchJobResponseSchema,
} from "../../proto/index.ts"
import type { BusShape, Subjects } from "../bus/index.ts"
import type { JobStoreShape } from "../jobs/index.ts"
import { InvalidArgument, type Violation } from "../jobs/index.ts"
import { authorize, type Role, type Tokens } from "./auth.ts"
import type { CallRunner } from "./calls.ts"
import type { ServiceHandlers } from "./grpc-adapter.ts"
import { fetchJobWeights } from "./job-weights.ts"
import type { GatewayMetrics } from "./metrics.ts"
import { validateJobId, validateJobSpec, validateRequestId } from "./validate.ts"

const check = (violations: ReadonlyArray<Violation | undefined>) => {
  const found = violations.filter((v): v is Violation => v !== undefined)
  return found.length === 0 ? Effect.void : Effect.fail(new InvalidArgument({ violations: found }))
}

/**
 * t1.v1.JobService over the job store. Stateless: everything lives on the bus, so any number of
 * gateways can serve the same jobs. Readers may Get, List, Watch and fetch weights; Submit and
 * Cancel need admin.
 */
export const jobServiceHandlers = (options: {
  readonly bus: BusShape
  readonly subjects: Subjects
  readonly store: JobStoreShape
  readonly runner: CallRunner
  readonly metrics: GatewayMetrics
  readonly tokens: Tokens | undefined
}): ServiceHandlers<(typeof JobService)["method"]> => {
  const { bus, subjects, store, runner, metrics, tokens } = options
  const guarded = (method: string, role: Role) => (metadata: Parameters<typeof authorize>[1]) =>
    authorize(tokens, metadata, role, method)

  return {
    submitJob: runner.unary("JobService/SubmitJob", (call) =>
      Effect.gen(function* () {
        yield* guarded("SubmitJob", "admin")(call.metadata)
        const { spec, requestId } = call.request
        yield* check([...validateJobSpec(spec), validateRequestId(requestId)])
        if (spec === undefined) return yield* InvalidArgument.of("spec", "required")
        const { status, created } = yield* store.create(spec, { requestId })
        yield* Effect.logInfo(
          created
            ? `gateway: job ${status.jobId} submitted (${spec.name || "unnamed"})`
            : `gateway: job ${status.jobId} resubmitted with request_id ${requestId}`,
        )
        return create(SubmitJobResponseSchema, { jobId: status.jobId, status })
      }),
    ),

    getJob: runner.unary("JobService/GetJob", (call) =>
      Effect.gen(function* () {
        yield* guarded("GetJob", "reader")(call.metadata)
        yield* check([validateJobId(call.request.jobId)])
        const status = yield* store.get(call.request.jobId)
        return create(GetJobResponseSchema, { status })
      }),
    ),

    listJobs: runner.unary("JobService/ListJobs", (call) =>
      Effect.gen(function* () {
        yield* guarded("ListJobs", "reader")(call.metadata)
        const { state, pageToken, pageSize } = call.request
        if (JobState[state] === undefined) {
          return yield* InvalidArgument.of("state", `must be a JobState value, got ${state}`)
        }
        const page = yield* store.list({ state }, pageToken, pageSize)
        return create(ListJobsResponseSchema, {
          jobs: [...page.jobs],
          nextPageToken: page.nextPageToken,
        })
      }),
    ),

    cancelJob: runner.unary("JobService/CancelJob", (call) =>
      Effect.gen(function* () {
        yield* guarded("CancelJob", "admin")(call.metadata)
        const { jobId, reason } = call.request
        yield* check([
          validateJobId(jobId),
          reason.length > 1024
            ? { fieldPath: "reason", reason: "must be at most 1024 characters" }
            : undefined,
        ])
        const status = yield* store.cancel(jobId, reason)
        yield* Effect.logInfo(
          `gateway: job ${jobId} cancel requested${reason ? `: ${reason}` : ""}`,
        )
        return create(CancelJobResponseSchema, { status })
      }),
    ),

    watchJob: runner.serverStream("JobService/WatchJob", (call, write) =>
      Effect.gen(function* () {
        yield* guarded("WatchJob", "reader")(call.metadata)
        yield* check([validateJobId(call.request.jobId)])
        metrics.watchStreams.inc()
        yield* Stream.runForEach(store.watch(call.request.jobId, call.request.fromSeq), (event) =>
          write(create(WatchJobResponseSchema, { event })),
        ).pipe(Effect.ensuring(Effect.sync(() => metrics.watchStreams.dec())))
      }),
    ),

    fetchJobWeights: runner.serverStream("JobService/FetchJobWeights", (call, write) =>
      Effect.gen(function* () {
        yield* guarded("FetchJobWeights", "reader")(call.metadata)
        const { jobId, policyVersion } = call.request
        yield* check([validateJobId(jobId)])
        yield* fetchJobWeights({ bus, subjects, store }, jobId, policyVersion, write)
      }),
    ),
  }
}
