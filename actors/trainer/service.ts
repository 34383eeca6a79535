/**
 * t1.v1.TrainerService, served by the gateway beside JobService (same auth: the admin role, TLS,
 * health and reflection): the learner role of a train job with `learner.external`, for a trainer
 * t1 does not run (PyTorch, Megatron, DeepSpeed). It is backed by the machinery the TypeScript
 * learner uses — the learner lease, the job's buffer, the weights object store and announcement,
 * job events — so samplers, engine bridges, the buffer and the coordinator cannot tell the two
 * learners apart.
 */
import { createHash } from "node:crypto"
import { readFile } from "node:fs/promises"
import { isAbsolute } from "node:path"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { Clock, Effect, Option, Semaphore, Stream } from "effect"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { decodeWeights, encodeWeights, type TinyMoeConfig } from "../../model/index.ts"
import {
  ClaimJobResponseSchema,
  FetchTrajectoryResponseSchema,
  FetchWeightsResponseSchema,
  file_t1_v1_trainer,
  JobKind,
  type JobSpec,
  type JobStatus,
  PublishWeightsRefResponseSchema,
  type PublishWeightsRequest,
  PublishWeightsResponseSchema,
  ReportStepResponseSchema,
  TrainerService,
  TrainerServiceTakeBatchResponseSchema,
  type TrainStepReport,
  TrainStepReportSchema,
} from "../../proto/index.ts"
import { Bus, type BusError, type Subjects } from "../../services/bus/index.ts"
import {
  authorize,
  type GatewayContext,
  type GatewayService,
  type ServiceHandlers,
  StatusError,
  serviceDefinition,
  validateJobId,
} from "../../services/gateway/index.ts"
import { isTerminalState, type JobStoreShape, jobStoreFor } from "../../services/jobs/index.ts"
import { Metrics, type MetricsShape } from "../../services/metrics/index.ts"
import {
  latestAnnouncement,
  publishWeightBytes,
  readVersion,
  resolvePolicyRef,
} from "../../services/weights/index.ts"
import { bufferNames, takeBatch } from "../buffer/index.ts"
import { jobLearnerPlan } from "../learner/index.ts"
import { readBatchRecord, writeBatchRecord } from "./batches.ts"
import { checkLease, claimLease } from "./lease.ts"
import {
  type CheckedWeights,
  checkWeightsDir,
  checkWeightsFile,
  type Published,
  refKind,
} from "./weights-check.ts"

export interface TrainerServiceOptions {
  readonly subjects: Subjects
  /** Largest weights file accepted (PublishWeights, PublishWeightsRef); default 4 GiB. */
  readonly maxWeightsBytes?: number
}

const DEFAULT_LEASE_TTL_MS = 30_000
const MAX_LEASE_TTL_MS = 600_000
const DEFAULT_WAIT_MS = 30_000
const MAX_WAIT_MS = 600_000
/** FetchWeights and FetchTrajectory chunk size: well under gRPC's default 4 MiB receive limit. */
const CHUNK_BYTES = 1 << 20
const TRAINER_ID = /^[A-Za-z0-9_.:@-]{1,128}$/

const invalid = (details: string) =>
  new StatusError({ code: grpc.status.INVALID_ARGUMENT, details })
const precondition = (details: string) =>
  new StatusError({ code: grpc.status.FAILED_PRECONDITION, details })

const requireJobId = (jobId: string) => {
  const v = validateJobId(jobId)
  return v === undefined ? Effect.void : Effect.fail(invalid(`${v.fieldPath}: ${v.reason}`))
}

/** The job's status, when it is a live train job whose learner is external. */
const externalJob = (store: JobStoreShape, jobId: string) =>
  Effect.gen(function* () {
    yield* requireJobId(jobId)
    const status = yield* store.get(jobId)
    const spec = status.spec
    if (isTerminalState(status.state))
      return yield* precondition(`job ${jobId} has ended; nothing to train`)
    if (spec?.kind !== JobKind.TRAIN || spec.learner?.external !== true)
      return yield* precondition(
        `job ${jobId}'s learner is t1's TypeScript learner pool, not an external trainer: submit a JOB_KIND_TRAIN job with learner.external = true`,
      )
    return { status, spec } as { readonly status: JobStatus; readonly spec: JobSpec }
  })

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

/** What the gateway records of external trainers' steps and versions (`job` label). */
const trainerMetrics = (m: MetricsShape) => {
  const g = (name: string, help: string) =>
    m.gauge({ name: `t1_trainer_${name}`, help, labelNames: ["job"] })
  return {
    steps: m.counter({
      name: "t1_trainer_steps_total",
      help: "Steps of external trainers recorded as job events",
      labelNames: ["job"],
    }),
    published: m.counter({
      name: "t1_trainer_weights_published_total",
      help: "Versions external trainers published (checked, stored and announced)",
      labelNames: ["job"],
    }),
    version: g("policy_version", "Latest version an external trainer published"),
    diff: g(
      "train_infer_logprob_abs_diff",
      "Mean |log p_learner − log p_sampler| the trainer reported for its last recorded step",
    ),
    policyLoss: g("policy_loss", "Policy loss of the last recorded step"),
    valueLoss: g("value_loss", "Value loss of the last recorded step"),
    reward: g("reward_mean", "Mean reward of the last recorded step's batch"),
  }
}

export const trainerService = (
  o: TrainerServiceOptions,
): Effect.Effect<GatewayService, BusError, Bus | Metrics> =>
  Effect.gen(function* () {
    const bus = yield* Bus
    const m = trainerMetrics(yield* Metrics)
    const store = yield* jobStoreFor(bus, o.subjects)
    const leases = yield* bus.kv(`${o.subjects.prefix}-learner-leases`)
    const batchKv = yield* bus.kv(`${o.subjects.prefix}-trainer-batches`)
    const maxBytes = o.maxWeightsBytes ?? 4 * 1024 ** 3
    const vocabSize = loadBundledTokenizer().vocabSize

    /** The job's current weights file: the latest published version, or its starting weights. */
    const currentWeights = (jobId: string, spec: JobSpec) =>
      Effect.gen(function* () {
        const latest = yield* latestAnnouncement(bus, o.subjects, jobId)
        if (latest !== undefined) {
          const objects = yield* bus.objectStore(latest.bucket)
          const bytes = yield* objects.get(latest.name)
          if (Option.isNone(bytes) || sha256(bytes.value) !== latest.sha256)
            return yield* new StatusError({
              code: grpc.status.UNAVAILABLE,
              details: `job ${jobId}: weights v${latest.policyVersion} are missing or corrupt in ${latest.bucket}`,
            })
          return { version: latest.policyVersion, step: latest.step, bytes: bytes.value }
        }
        const start = yield* resolvePolicyRef(bus, o.subjects, spec.policyRef, vocabSize).pipe(
          Effect.mapError((e) =>
            e._tag === "WeightsUnavailable" ? precondition(`spec.policy_ref: ${e.message}`) : e,
          ),
        )
        return {
          version: start.version,
          step: 0n,
          bytes: encodeWeights(start.model, "F32", { version: start.version }),
        }
      })

    /** One version the job published (any it keeps); NOT_FOUND when it never published it. */
    const versionWeights = (jobId: string, version: bigint) =>
      Effect.gen(function* () {
        const found = yield* readVersion(bus, o.subjects, jobId, version).pipe(
          Effect.mapError((e) =>
            e._tag === "WeightsUnavailable"
              ? new StatusError({
                  code: grpc.status.DATA_LOSS,
                  details: `job ${jobId}: ${e.message}`,
                })
              : e,
          ),
        )
        if (found === undefined) {
          const latest = yield* latestAnnouncement(bus, o.subjects, jobId)
          return yield* new StatusError({
            code: grpc.status.NOT_FOUND,
            details: `policy_version ${version}: job ${jobId} never published it (its latest is ${latest?.policyVersion ?? "none"})`,
          })
        }
        return {
          version: found.announcement.policyVersion,
          step: found.announcement.step,
          bytes: found.bytes,
        }
      })

    /**
     * A publish must be exactly the next version and step: the step `publish_every_steps` after
     * the latest (the step budget's last one at most), the version advanced by as many steps, as
     * t1's learner numbers them. 0 is wrong whatever the job's state (INVALID_ARGUMENT); another
     * value is wrong for where the job is now (FAILED_PRECONDITION: the trainer resumes from
     * what ClaimJob says).
     */
    const checkNext = (
      spec: JobSpec,
      req: { readonly policyVersion: bigint; readonly step: bigint },
      latest: { readonly version: bigint; readonly step: bigint },
    ) => {
      const plan = jobLearnerPlan(spec)
      const every = BigInt(plan.config.publishEverySteps)
      const budget = plan.maxSteps === undefined ? undefined : BigInt(plan.maxSteps)
      const step =
        budget !== undefined && latest.step < budget && latest.step + every > budget
          ? budget
          : latest.step + every
      const version = latest.version + (step - latest.step)
      if (req.policyVersion === 0n)
        return Effect.fail(
          invalid(
            `policy_version: must be >= 1 (0 is the starting weights), got 0; the next is ${version}`,
          ),
        )
      if (req.step === 0n)
        return Effect.fail(
          invalid(
            `step: must be >= 1 (step 0 is the starting weights), got 0; the next is ${step}`,
          ),
        )
      if (req.policyVersion === version && req.step === step) return Effect.void
      return Effect.fail(
        precondition(
          `policy_version ${req.policyVersion} at step ${req.step}: expected exactly the next, version ${version} at step ${step} (the job's latest is version ${latest.version} at step ${latest.step}${every > 1n ? `, publishing every ${every} steps` : ""}); no jumps, no going back: ClaimJob says where the job is`,
        ),
      )
    }

    /** One publish at a time per job in this gateway: the next-version check holds until the announcement. */
    const publishLocks = new Map<string, Semaphore.Semaphore>()
    const lockOf = (jobId: string) => {
      let lock = publishLocks.get(jobId)
      if (lock === undefined) {
        lock = Semaphore.makeUnsafe(1)
        publishLocks.set(jobId, lock)
      }
      return lock
    }

    /**
     * Checks and announces a trainer's weights (a file's bytes, or a checkpoint directory read by
     * `source`); any failure: nothing is stored or announced.
     */
    const publish = (
      req: {
        readonly jobId: string
        readonly leaseId: string
        readonly policyVersion: bigint
        readonly step: bigint
        readonly format: string
        readonly batchIds: ReadonlyArray<string>
      },
      source: (
        expected: TinyMoeConfig,
        published: Published,
      ) => Effect.Effect<CheckedWeights, StatusError>,
    ) =>
      Effect.gen(function* () {
        const { spec } = yield* externalJob(store, req.jobId)
        yield* checkLease(leases, req.jobId, req.leaseId)
        if (req.format !== "safetensors")
          return yield* invalid(`format: must be "safetensors", got ${JSON.stringify(req.format)}`)
        const current = yield* currentWeights(req.jobId, spec)
        yield* checkNext(spec, req, current)
        const expected = decodeWeights(current.bytes).model.config
        const { bytes, reencoded } = yield* source(expected, {
          jobId: req.jobId,
          version: req.policyVersion,
          step: req.step,
        })
        // The steps this version completes become job events first: the job ends at the
        // announcement of its last step, and its events must already hold that step.
        const record = yield* readBatchRecord(batchKv, req.jobId)
        const reports = record.pending.map((b64) =>
          fromBinary(TrainStepReportSchema, Buffer.from(b64, "base64")),
        )
        const due = reports
          .filter((r) => r.policyVersion <= req.policyVersion)
          .sort((a, b) => Number(a.step - b.step))
        const now = yield* Clock.currentTimeMillis
        for (const r of due) {
          const job = { job: req.jobId }
          m.steps.inc(job)
          m.diff.set(job, r.trainInferLogprobAbsDiff)
          m.policyLoss.set(job, r.policyLoss)
          m.valueLoss.set(job, r.valueLoss)
          m.reward.set(job, r.rewardMean)
          yield* store.appendEvent(req.jobId, {
            event: {
              case: "learnerStep",
              value: create(TrainStepReportSchema, {
                ...r,
                jobId: req.jobId,
                finishedUnixMs: r.finishedUnixMs === 0n ? BigInt(now) : r.finishedUnixMs,
              }),
            },
          })
        }
        yield* writeBatchRecord(batchKv, req.jobId, {
          ...record,
          pending: record.pending.filter(
            (_, i) => (reports[i]?.policyVersion ?? 0n) > req.policyVersion,
          ),
          reportedStep: Math.max(record.reportedStep, ...due.map((r) => Number(r.step))),
          // The batches it trained on are confirmed by the next take, whoever takes it.
          trained:
            record.served !== "" && req.batchIds.includes(record.served)
              ? record.served
              : record.trained,
        })
        const announcement = yield* publishWeightBytes(
          bus,
          o.subjects,
          req.jobId,
          bytes,
          req.policyVersion,
          req.step,
        )
        m.published.inc({ job: req.jobId })
        m.version.set({ job: req.jobId }, Number(req.policyVersion))
        yield* Effect.logInfo(
          `trainer: job ${req.jobId}: external weights v${req.policyVersion} (step ${req.step}, ${bytes.length} bytes${reencoded ? ", re-encoded as t1's weights file" : ""}) announced`,
        )
        return announcement
      }).pipe(lockOf(req.jobId).withPermits(1))

    const handlers = (ctx: GatewayContext): ServiceHandlers<(typeof TrainerService)["method"]> => {
      const { runner, tokens } = ctx
      const admin = (method: string, metadata: grpc.Metadata) =>
        authorize(tokens, metadata, "admin", method)
      return {
        claimJob: runner.unary("TrainerService/ClaimJob", (call) =>
          Effect.gen(function* () {
            yield* admin("ClaimJob", call.metadata)
            const { jobId, trainerId, leaseTtlMs } = call.request
            if (!TRAINER_ID.test(trainerId))
              return yield* invalid(
                `trainer_id: must be 1 to 128 characters of [A-Za-z0-9_.:@-], got ${JSON.stringify(trainerId.slice(0, 140))}`,
              )
            if (leaseTtlMs > MAX_LEASE_TTL_MS)
              return yield* invalid(`lease_ttl_ms: at most ${MAX_LEASE_TTL_MS}, got ${leaseTtlMs}`)
            const { spec } = yield* externalJob(store, jobId)
            const lease = yield* claimLease(
              leases,
              jobId,
              trainerId,
              leaseTtlMs || DEFAULT_LEASE_TTL_MS,
            )
            // The job's first version is announced as t1's learner announces its starting
            // weights: the coordinator admits a train job's episodes only after it.
            const latest =
              (yield* latestAnnouncement(bus, o.subjects, jobId)) ??
              (yield* Effect.flatMap(currentWeights(jobId, spec), (start) =>
                publishWeightBytes(bus, o.subjects, jobId, start.bytes, start.version, 0n),
              ))
            const record = yield* readBatchRecord(batchKv, jobId)
            return create(ClaimJobResponseSchema, {
              lease: {
                jobId,
                trainerId,
                leaseId: lease.leaseId,
                expiresUnixMs: BigInt(lease.expiresAtMs),
              },
              spec,
              policyVersion: latest.policyVersion,
              step: latest.step,
              pendingBatchId: record.served === record.trained ? "" : record.served,
            })
          }),
        ),

        fetchWeights: runner.serverStream("TrainerService/FetchWeights", (call, write) =>
          Effect.gen(function* () {
            yield* admin("FetchWeights", call.metadata)
            const { jobId, leaseId, policyVersion } = call.request
            const { spec } = yield* externalJob(store, jobId)
            yield* checkLease(leases, jobId, leaseId)
            const current =
              policyVersion === undefined
                ? yield* currentWeights(jobId, spec)
                : yield* versionWeights(jobId, policyVersion)
            const digest = sha256(current.bytes)
            for (let at = 0; at < current.bytes.length || at === 0; at += CHUNK_BYTES) {
              yield* write(
                create(FetchWeightsResponseSchema, {
                  policyVersion: current.version,
                  step: current.step,
                  format: "safetensors",
                  sizeBytes: BigInt(current.bytes.length),
                  sha256: digest,
                  data: current.bytes.subarray(at, at + CHUNK_BYTES),
                }),
              )
              if (current.bytes.length === 0) break
            }
          }),
        ),

        takeBatch: runner.unary("TrainerService/TakeBatch", (call) =>
          Effect.gen(function* () {
            yield* admin("TakeBatch", call.metadata)
            const r = call.request
            if (r.waitMs > MAX_WAIT_MS)
              return yield* invalid(`wait_ms: at most ${MAX_WAIT_MS}, got ${r.waitMs}`)
            const { spec } = yield* externalJob(store, r.jobId)
            yield* checkLease(leases, r.jobId, r.leaseId)
            const record = yield* readBatchRecord(batchKv, r.jobId)
            if (r.ackBatchId !== "" && r.ackBatchId !== record.served)
              return yield* precondition(
                `ack_batch_id ${JSON.stringify(r.ackBatchId)} is not the batch last served for job ${r.jobId} (${JSON.stringify(record.served)}): confirm only the batch of your previous take`,
              )
            // The trainer's own confirmation, or a batch a published version trained on.
            const ack =
              r.ackBatchId !== ""
                ? r.ackBatchId
                : record.trained !== "" && record.trained === record.served
                  ? record.trained
                  : ""
            const plan = jobLearnerPlan(spec)
            const latest = yield* latestAnnouncement(bus, o.subjects, r.jobId)
            const batch = yield* takeBatch(
              bus,
              o.subjects,
              {
                jobId: r.jobId,
                maxTrajectories: r.maxTrajectories || plan.batchSize,
                maxTokens: r.maxTokens,
                policyVersion: latest?.policyVersion ?? 0n,
                maxStaleness: plan.maxStaleness,
                waitMs: r.waitMs || DEFAULT_WAIT_MS,
                wholeGroups: plan.groupSize > 1,
                groupSize: plan.groupSize,
                ackBatchId: ack,
              },
              { resolveRefs: false },
            ).pipe(
              Effect.mapError((e) =>
                e._tag === "BufferClientError"
                  ? new StatusError({ code: grpc.status.UNAVAILABLE, details: e.message })
                  : e,
              ),
            )
            yield* writeBatchRecord(batchKv, r.jobId, {
              ...record,
              leaseId: r.leaseId,
              served: batch.batchId,
              trained: "",
            })
            return create(TrainerServiceTakeBatchResponseSchema, { batch })
          }),
        ),

        fetchTrajectory: runner.serverStream("TrainerService/FetchTrajectory", (call, write) =>
          Effect.gen(function* () {
            yield* admin("FetchTrajectory", call.metadata)
            const { jobId, leaseId, ref } = call.request
            yield* externalJob(store, jobId)
            yield* checkLease(leases, jobId, leaseId)
            const names = bufferNames(o.subjects, jobId)
            // Only the job's own served trajectories: the ref names an object of its buffer.
            if (
              ref === undefined ||
              ref.bucket !== names.objectBucket ||
              !ref.name.startsWith(`${jobId}/`)
            )
              return yield* invalid(
                `ref: must be one of the job's Batch.trajectory_refs (bucket ${names.objectBucket}, name ${jobId}/…), got ${JSON.stringify(`${ref?.bucket ?? ""}/${ref?.name ?? ""}`)}`,
              )
            const objects = yield* bus.objectStore(ref.bucket)
            const found = yield* objects.get(ref.name)
            if (Option.isNone(found))
              return yield* new StatusError({
                code: grpc.status.NOT_FOUND,
                details: `trajectory ${ref.name} is not in ${ref.bucket}: its batch was confirmed (or never served)`,
              })
            const bytes = found.value
            const digest = sha256(bytes)
            if (ref.sha256 !== "" && digest !== ref.sha256)
              return yield* new StatusError({
                code: grpc.status.DATA_LOSS,
                details: `trajectory ${ref.name}: the stored bytes hash to ${digest}, not ${ref.sha256}`,
              })
            for (let at = 0; at < bytes.length || at === 0; at += CHUNK_BYTES) {
              yield* write(
                create(FetchTrajectoryResponseSchema, {
                  sizeBytes: BigInt(bytes.length),
                  sha256: digest,
                  data: bytes.subarray(at, at + CHUNK_BYTES),
                }),
              )
              if (bytes.length === 0) break
            }
          }),
        ),

        publishWeights: runner.clientStream("TrainerService/PublishWeights", (call) =>
          Effect.gen(function* () {
            yield* admin("PublishWeights", call.metadata)
            const parts: Uint8Array[] = []
            let header:
              | Extract<PublishWeightsRequest["part"], { case: "header" }>["value"]
              | undefined
            let received = 0
            yield* Stream.fromAsyncIterable(call as AsyncIterable<PublishWeightsRequest>, (e) =>
              invalid(`stream: ${e instanceof Error ? e.message : String(e)}`),
            ).pipe(
              Stream.runForEach((m) =>
                Effect.suspend(() => {
                  if (m.part.case === "header") {
                    if (header !== undefined)
                      return Effect.fail(invalid("header: sent twice; one header, then the bytes"))
                    header = m.part.value
                    if (header.sizeBytes > BigInt(maxBytes))
                      return Effect.fail(
                        invalid(`header.size_bytes: at most ${maxBytes}, got ${header.sizeBytes}`),
                      )
                    return Effect.void
                  }
                  if (m.part.case !== "data")
                    return Effect.fail(invalid("a message with neither header nor data"))
                  if (header === undefined)
                    return Effect.fail(invalid("data before the header: send the header first"))
                  received += m.part.value.length
                  if (BigInt(received) > header.sizeBytes)
                    return Effect.fail(
                      invalid(`data: more than header.size_bytes (${header.sizeBytes}) bytes`),
                    )
                  parts.push(m.part.value)
                  return Effect.void
                }),
              ),
            )
            const h = header
            if (h === undefined) return yield* invalid("header: required (the stream was empty)")
            if (BigInt(received) !== h.sizeBytes)
              return yield* invalid(
                `data: the stream ended after ${received} of ${h.sizeBytes} bytes (truncated)`,
              )
            const bytes = new Uint8Array(received)
            let at = 0
            for (const p of parts) {
              bytes.set(p, at)
              at += p.length
            }
            if (h.sha256 !== "" && sha256(bytes) !== h.sha256.toLowerCase())
              return yield* invalid(`sha256: the bytes hash to ${sha256(bytes)}, not ${h.sha256}`)
            const announcement = yield* publish(h, (expected, p) =>
              checkWeightsFile(bytes, expected, p, "PublishWeights data"),
            )
            return create(PublishWeightsResponseSchema, { announcement })
          }),
        ),

        publishWeightsRef: runner.unary("TrainerService/PublishWeightsRef", (call) =>
          Effect.gen(function* () {
            yield* admin("PublishWeightsRef", call.metadata)
            const r = call.request
            if (!isAbsolute(r.path))
              return yield* invalid(`path: must be absolute, got ${JSON.stringify(r.path)}`)
            const kind = yield* refKind(r.path, maxBytes)
            const announcement = yield* publish(r, (expected, p) =>
              kind === "directory"
                ? checkWeightsDir(r.path, expected, p)
                : Effect.tryPromise({
                    try: () => readFile(r.path),
                    catch: (e) =>
                      invalid(`path ${r.path}: ${e instanceof Error ? e.message : String(e)}`),
                  }).pipe(
                    Effect.flatMap((bytes) =>
                      checkWeightsFile(new Uint8Array(bytes), expected, p, r.path),
                    ),
                  ),
            )
            return create(PublishWeightsRefResponseSchema, { announcement })
          }),
        ),

        reportStep: runner.unary("TrainerService/ReportStep", (call) =>
          Effect.gen(function* () {
            yield* admin("ReportStep", call.metadata)
            const { jobId, leaseId, report } = call.request
            yield* externalJob(store, jobId)
            yield* checkLease(leases, jobId, leaseId)
            if (report === undefined) return yield* invalid("report: required")
            if (report.jobId !== "" && report.jobId !== jobId)
              return yield* invalid(`report.job_id: ${report.jobId} is not ${jobId}`)
            if (report.step === 0n) return yield* invalid("report.step: must be >= 1")
            // Held until the version it made is published (then recorded as the job's event):
            // a trainer that dies between the two redoes the step from the last published
            // version, and its new report replaces this one. A step already recorded is
            // accepted and not recorded twice.
            const record = yield* readBatchRecord(batchKv, jobId)
            if (report.step <= BigInt(record.reportedStep)) {
              yield* Effect.logInfo(
                `trainer: job ${jobId}: step ${report.step} is recorded already; not recorded again`,
              )
              return create(ReportStepResponseSchema, {})
            }
            const latest = yield* latestAnnouncement(bus, o.subjects, jobId)
            if (report.policyVersion <= (latest?.policyVersion ?? 0n))
              return yield* invalid(
                `report.policy_version: the version this step makes, greater than the job's latest ${latest?.policyVersion ?? 0n}, got ${report.policyVersion}`,
              )
            const kept = record.pending.filter(
              (b64) =>
                fromBinary(TrainStepReportSchema, Buffer.from(b64, "base64")).step < report.step,
            )
            const encoded = toBinary(
              TrainStepReportSchema,
              create(TrainStepReportSchema, { ...(report as TrainStepReport), jobId }),
            )
            yield* writeBatchRecord(batchKv, jobId, {
              ...record,
              pending: [...kept, Buffer.from(encoded).toString("base64")],
            })
            return create(ReportStepResponseSchema, {})
          }),
        ),
      }
    }

    return {
      typeName: TrainerService.typeName,
      file: file_t1_v1_trainer,
      install: (server, ctx) => server.addService(serviceDefinition(TrainerService), handlers(ctx)),
    }
  })
