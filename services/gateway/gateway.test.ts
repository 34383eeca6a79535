import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { create, createFileRegistry, fromBinary, type MessageInitShape } from "@bufbuild/protobuf"
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt"
import * as grpc from "@grpc/grpc-js"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { ErrorCode, JobKind, JobService, type JobSpecSchema, JobState } from "../../proto/index.ts"
import { MemoryBusLive } from "../bus/index.ts"
import { type GatewayCallError, jobServiceClient } from "./client.ts"
import {
  type GatewayHarness,
  gatewayHarness,
  opensslAvailable,
  rawClient,
  selfSignedCertificate,
} from "./gateway.fixture.ts"
import {
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus,
  HealthCheckResponseSchema,
} from "./gen/grpc/health/v1/health_pb.ts"
import { serviceDefinition } from "./grpc-adapter.ts"
import { reflectionV1, reflectionV1alpha } from "./reflection.ts"

type SpecInit = MessageInitShape<typeof JobSpecSchema>

const evalSpec = (over: SpecInit = {}): SpecInit =>
  ({
    name: "eval",
    kind: JobKind.EVAL,
    taskSet: "bundled-eval",
    samplesPerTask: 4,
    sampling: { temperature: 0.7, topP: 0.95, maxTokens: 256 },
    limits: { maxTurns: 30, maxTokens: 8192 },
    ...over,
  }) as SpecInit

const trainSpec = (learner: SpecInit["learner"] = {}): SpecInit => ({
  name: "train",
  kind: JobKind.TRAIN,
  taskSet: "bundled-train",
  learner: { clipEps: 0.2, lr: 1e-5, gamma: 1, batchTrajectories: 8, minibatches: 2, ...learner },
})

/** The GatewayCallError a promise rejects with. */
const rejection = async (p: Promise<unknown>): Promise<GatewayCallError> => {
  try {
    await p
  } catch (error) {
    return error as GatewayCallError
  }
  throw new Error("expected the call to fail")
}

const collect = async <A>(items: AsyncIterable<A>): Promise<A[]> => {
  const out: A[] = []
  for await (const item of items) out.push(item)
  return out
}

const HEALTH = "/grpc.health.v1.Health"

let h: GatewayHarness
beforeAll(async () => {
  h = await gatewayHarness(MemoryBusLive())
})
afterAll(() => h.close())

describe("gateway (in-memory bus)", () => {
  it("derives grpc-js definitions from the protobuf-es service", () => {
    const def = serviceDefinition(JobService)
    expect(def.submitJob.path).toBe("/t1.v1.JobService/SubmitJob")
    expect([def.watchJob.requestStream, def.watchJob.responseStream]).toEqual([false, true])
    expect([def.getJob.requestStream, def.getJob.responseStream]).toEqual([false, false])
    const info = serviceDefinition(reflectionV1.ServerReflection).serverReflectionInfo
    expect([info.requestStream, info.responseStream]).toEqual([true, true])
  })

  it("submits, gets, lists and cancels jobs", async () => {
    const gw = await h.start()
    const client = gw.client()
    const submitted = await client.submitJob({ spec: evalSpec({ name: "first" }) })
    expect(submitted.jobId).toMatch(/^job-/)
    expect(submitted.status?.state).toBe(JobState.PENDING)
    expect(submitted.status?.lastEventSeq).toBe(1n)
    const second = await client.submitJob({ spec: evalSpec({ name: "second" }) })

    const got = await client.getJob({ jobId: submitted.jobId })
    expect(got.status?.spec?.name).toBe("first")
    expect(got.status?.spec?.sampling?.topP).toBeCloseTo(0.95)

    const listed = await client.listJobs({ pageSize: 1 })
    expect(listed.jobs.map((j) => j.jobId)).toEqual([second.jobId])
    const rest = await client.listJobs({ pageSize: 1, pageToken: listed.nextPageToken })
    expect(rest.jobs.map((j) => j.jobId)).toContain(submitted.jobId)

    const cancelled = await client.cancelJob({ jobId: submitted.jobId, reason: "changed my mind" })
    expect(cancelled.status?.state).toBe(JobState.CANCELLED)
    const onlyCancelled = await client.listJobs({ state: JobState.CANCELLED })
    expect(onlyCancelled.jobs.map((j) => j.jobId)).toEqual([submitted.jobId])

    const again = await rejection(client.cancelJob({ jobId: submitted.jobId }))
    expect(again.code).toBe(grpc.status.FAILED_PRECONDITION)
    expect((await rejection(client.getJob({ jobId: "job-missing" }))).code).toBe(
      grpc.status.NOT_FOUND,
    )
    const badId = await rejection(client.getJob({ jobId: "a.b" }))
    expect([badId.code, badId.fieldPath]).toEqual([grpc.status.INVALID_ARGUMENT, "job_id"])
    const badToken = await rejection(client.listJobs({ pageToken: "nope" }))
    expect([badToken.code, badToken.fieldPath]).toEqual([
      grpc.status.INVALID_ARGUMENT,
      "page_token",
    ])
  })

  it("makes a submission with a request_id idempotent", async () => {
    const gw = await h.start()
    const client = gw.client()
    const a = await client.submitJob({ spec: evalSpec(), requestId: "retry-me" })
    const b = await client.submitJob({ spec: evalSpec(), requestId: "retry-me" })
    expect(b.jobId).toBe(a.jobId)
    expect(b.status?.lastEventSeq).toBe(1n)
    const clash = await rejection(
      client.submitJob({ spec: evalSpec({ name: "other" }), requestId: "retry-me" }),
    )
    expect(clash.code).toBe(grpc.status.ALREADY_EXISTS)
  })

  it.each<[string, SpecInit | undefined, string, string]>([
    [
      "clip eps",
      trainSpec({ clipEps: 1.5 }),
      "spec.learner.clip_eps",
      "spec.learner.clip_eps: must be in (0, 1), got 1.5",
    ],
    ["learner lr", trainSpec({ lr: -1 }), "spec.learner.lr", "must be in (0, 1), got -1"],
    ["gamma", trainSpec({ gamma: 1.2 }), "spec.learner.gamma", "must be in [0, 1], got 1.2"],
    [
      "minibatches",
      trainSpec({ batchTrajectories: 4, minibatches: 8 }),
      "spec.learner.minibatches",
      "must be <= spec.learner.batch_trajectories (4), got 8",
    ],
    ["missing learner", { ...trainSpec(), learner: undefined }, "spec.learner", "required"],
    [
      "temperature",
      evalSpec({ sampling: { temperature: -0.5 } }),
      "spec.sampling.temperature",
      "must be >= 0, got -0.5",
    ],
    ["top p", evalSpec({ sampling: { topP: 1.5 } }), "spec.sampling.top_p", "got 1.5"],
    [
      "turn budget",
      evalSpec({ sampling: { maxTokens: 9000 }, limits: { maxTokens: 8192 } }),
      "spec.sampling.max_tokens",
      "must be <= spec.limits.max_tokens (8192), got 9000",
    ],
    ["kind", evalSpec({ kind: JobKind.UNSPECIFIED }), "spec.kind", "JOB_KIND_UNSPECIFIED"],
    ["task set", evalSpec({ taskSet: "" }), "spec.task_set", "spec.task_set: required"],
    [
      "duplicate task",
      evalSpec({ taskIds: ["a", "b", "a"] }),
      "spec.task_ids[2]",
      "duplicate of spec.task_ids[0]",
    ],
    ["samples", evalSpec({ samplesPerTask: 5000 }), "spec.samples_per_task", "<= 1024"],
    ["label", evalSpec({ labels: { "bad key": "x" } }), 'spec.labels["bad key"]', "key must"],
    ["no spec", undefined, "spec", "spec: required"],
  ])("answers INVALID_ARGUMENT naming the field: %s", async (_, spec, path, message) => {
    const gw = await h.start()
    const error = await rejection(gw.client().submitJob(spec === undefined ? {} : { spec }))
    expect(error.code).toBe(grpc.status.INVALID_ARGUMENT)
    expect(error.fieldPath).toBe(path)
    expect(error.details).toContain(message)
    expect(error.detail?.code).toBe(ErrorCode.INVALID_ARGUMENT)
    expect(error.detail?.fieldPath).toBe(path)
  })

  it("reports every invalid field, each in the t1-field-path trailer", async () => {
    const gw = await h.start()
    const error = await rejection(
      gw.client().submitJob({
        spec: { ...trainSpec({ clipEps: 2, entropyCoef: -1 }), taskSet: "" },
        requestId: "has space",
      }),
    )
    expect(error.fieldPaths).toEqual([
      "spec.task_set",
      "spec.learner.clip_eps",
      "spec.learner.entropy_coef",
      "request_id",
    ])
  })

  it("authenticates bearer tokens: admins write, readers read", async () => {
    const tokens = new Map([
      ["admin-secret", { role: "admin" as const }],
      ["reader-secret", { role: "reader" as const }],
    ])
    const gw = await h.start({ tokens })
    const admin = gw.client({ token: "admin-secret" })
    const reader = gw.client({ token: "reader-secret" })
    const { jobId } = await admin.submitJob({ spec: evalSpec() })

    for (const client of [gw.client(), gw.client({ token: "wrong" })]) {
      const error = await rejection(client.getJob({ jobId }))
      expect(error.code).toBe(grpc.status.UNAUTHENTICATED)
    }
    expect((await rejection(reader.submitJob({ spec: evalSpec() }))).code).toBe(
      grpc.status.PERMISSION_DENIED,
    )
    expect((await rejection(reader.cancelJob({ jobId }))).code).toBe(grpc.status.PERMISSION_DENIED)
    expect((await reader.getJob({ jobId })).status?.jobId).toBe(jobId)
    expect((await reader.listJobs({})).jobs.length).toBeGreaterThan(0)
    await admin.cancelJob({ jobId })
    const events = await collect(reader.watchJob({ jobId }))
    expect(events.map((e) => e.seq)).toEqual([1n, 2n])
    const anonymousWatch = await rejection(collect(gw.client().watchJob({ jobId })))
    expect(anonymousWatch.code).toBe(grpc.status.UNAUTHENTICATED)
    // Weights are read like the rest: a reader gets past auth (this eval job published none).
    expect((await rejection(gw.client().fetchJobWeights({ jobId }))).code).toBe(
      grpc.status.UNAUTHENTICATED,
    )
    const none = await rejection(reader.fetchJobWeights({ jobId }))
    expect([none.code, none.details]).toEqual([
      grpc.status.NOT_FOUND,
      `job ${jobId} has published no weights`,
    ])

    // Health and reflection stay open.
    const raw = rawClient(gw.endpoint.address)
    const health = await raw.unary(
      `${HEALTH}/Check`,
      HealthCheckRequestSchema,
      HealthCheckResponseSchema,
      {},
    )
    expect(health.status).toBe(HealthCheckResponse_ServingStatus.SERVING)
    raw.close()
  })

  it("WatchJob replays from a seq, follows live events and ends after the terminal one", async () => {
    const gw = await h.start()
    const client = gw.client()
    const store = await h.store()
    const { jobId } = await client.submitJob({ spec: evalSpec() })
    await h.run(store.transition(jobId, JobState.RUNNING)) // seq 2
    await h.run(
      store.appendEvent(jobId, { event: { case: "admitted", value: { episodesTotal: 2 } } }),
    ) // seq 3

    const seen: bigint[] = []
    const cases: (string | undefined)[] = []
    const watching = (async () => {
      for await (const event of client.watchJob({ jobId, fromSeq: 2n })) {
        seen.push(event.seq)
        cases.push(event.event.case)
        if (event.seq === 3n) {
          // Live from here on, appended the way the coordinator does.
          await h.run(
            store.appendEvent(jobId, {
              event: {
                case: "episodeFinished",
                value: { episodeId: "e1", reward: 2, resolved: true },
              },
            }),
          )
          await h.run(store.transition(jobId, JobState.SUCCEEDED))
        }
      }
    })()
    await watching
    expect(seen).toEqual([2n, 3n, 4n, 5n])
    expect(cases).toEqual(["stateChanged", "admitted", "episodeFinished", "stateChanged"])

    // Resuming after the end returns at once; a missing job is NOT_FOUND.
    expect(await collect(client.watchJob({ jobId, fromSeq: 6n }))).toEqual([])
    expect((await collect(client.watchJob({ jobId, fromSeq: 5n }))).map((e) => e.seq)).toEqual([5n])
    const missing = await rejection(collect(client.watchJob({ jobId: "job-nope" })))
    expect(missing.code).toBe(grpc.status.NOT_FOUND)
  })

  it("each client has a connection of its own: watches one client stopped do not cost another its calls", async () => {
    const gw = await h.start()
    const { jobId } = await gw.client().submitJob({ spec: evalSpec() })
    // Each stopped watch is an HTTP/2 stream reset; Node's server closes a connection that
    // resets more than 1000 streams in a burst (GOAWAY INTERNAL_ERROR, its rapid-reset guard).
    // 700 a client stays under that, 1400 on one shared connection would not.
    const watchAndStop = async (n: number) => {
      const client = jobServiceClient(gw.endpoint.address)
      let first = 0
      await Promise.all(
        Array.from({ length: n }, async () => {
          for await (const event of client.watchJob({ jobId, fromSeq: 1n })) {
            if (event.seq === 1n) first++
            break
          }
        }),
      )
      const job = await client.getJob({ jobId })
      client.close()
      return { first, jobId: job.status?.jobId }
    }
    expect(await watchAndStop(700)).toEqual({ first: 700, jobId })
    expect(await watchAndStop(700)).toEqual({ first: 700, jobId })
  })

  it("a cancel of a running job is a request to the coordinator", async () => {
    const gw = await h.start()
    const client = gw.client()
    const store = await h.store()
    const { jobId } = await client.submitJob({ spec: evalSpec() })
    await h.run(store.transition(jobId, JobState.RUNNING))
    const { status } = await client.cancelJob({ jobId, reason: "enough" })
    expect(status?.state).toBe(JobState.RUNNING)
    expect(status?.error?.code).toBe(ErrorCode.CANCELLED)
    expect(status?.error?.message).toBe("enough")
  })

  it("serves grpc.health.v1 Check and Watch", async () => {
    const gw = await h.start()
    const raw = rawClient(gw.endpoint.address)
    for (const service of ["", "t1.v1.JobService"]) {
      const answer = await raw.unary(
        `${HEALTH}/Check`,
        HealthCheckRequestSchema,
        HealthCheckResponseSchema,
        { service },
      )
      expect(answer.status).toBe(HealthCheckResponse_ServingStatus.SERVING)
    }
    const unknown = await raw
      .unary(`${HEALTH}/Check`, HealthCheckRequestSchema, HealthCheckResponseSchema, {
        service: "nope.Service",
      })
      .catch((e: grpc.ServiceError) => e)
    expect(unknown).toMatchObject({ code: grpc.status.NOT_FOUND })

    const watch = raw.serverStream(
      `${HEALTH}/Watch`,
      HealthCheckRequestSchema,
      HealthCheckResponseSchema,
      { service: "t1.v1.JobService" },
    )
    const first = await new Promise((resolve) => watch.once("data", resolve))
    expect(first).toMatchObject({ status: HealthCheckResponse_ServingStatus.SERVING })
    const statuses: number[] = []
    watch.on("data", (m: { status: number }) => statuses.push(m.status))
    const ended = new Promise<grpc.ServiceError>((resolve) => watch.on("error", resolve))
    await gw.stop()
    expect((await ended).code).toBe(grpc.status.UNAVAILABLE)
    expect(statuses).toEqual([HealthCheckResponse_ServingStatus.NOT_SERVING])
    raw.close()
  })

  it.each([
    ["v1", reflectionV1],
    ["v1alpha", reflectionV1alpha],
  ] as const)("serves server reflection %s", async (version, r) => {
    const gw = await h.start()
    const raw = rawClient(gw.endpoint.address)
    const answers = await raw.exchange(
      `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`,
      r.ServerReflectionRequestSchema,
      r.ServerReflectionResponseSchema,
      [
        { messageRequest: { case: "listServices", value: "" } },
        { messageRequest: { case: "fileContainingSymbol", value: "t1.v1.JobService" } },
        { messageRequest: { case: "fileContainingSymbol", value: "t1.v1.JobService.WatchJob" } },
        { messageRequest: { case: "fileByFilename", value: "t1/v1/common.proto" } },
        { messageRequest: { case: "fileContainingSymbol", value: "no.Such" } },
      ],
    )
    raw.close()
    expect(answers).toHaveLength(5)
    const [list, bySymbol, byMethod, byName, missing] = answers
    expect(list?.messageResponse.case).toBe("listServicesResponse")
    const services =
      list?.messageResponse.case === "listServicesResponse"
        ? list.messageResponse.value.service.map((s) => s.name)
        : []
    expect(services).toContain("t1.v1.JobService")
    expect(services).toContain("grpc.health.v1.Health")

    if (bySymbol?.messageResponse.case !== "fileDescriptorResponse") throw new Error("no file")
    const files = bySymbol.messageResponse.value.fileDescriptorProto.map((b) =>
      fromBinary(FileDescriptorProtoSchema, b),
    )
    expect(files[0]?.name).toBe("t1/v1/job.proto")
    expect(files.map((f) => f.name)).toEqual(
      expect.arrayContaining(["t1/v1/common.proto", "t1/v1/learner.proto", "t1/v1/task.proto"]),
    )
    // The set is complete: protobuf-es builds a registry from it (imports first) and finds
    // the service.
    const ordered: typeof files = []
    const visit = (name: string) => {
      const file = files.find((f) => f.name === name)
      if (file === undefined || ordered.includes(file)) return
      for (const d of file.dependency) visit(d)
      ordered.push(file)
    }
    visit("t1/v1/job.proto")
    expect(ordered).toHaveLength(files.length)
    const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: ordered }))
    const service = registry.getService("t1.v1.JobService")
    expect(service?.methods.map((m) => m.name)).toEqual([
      "SubmitJob",
      "GetJob",
      "WatchJob",
      "CancelJob",
      "ListJobs",
      "FetchJobWeights",
    ])
    expect(service?.methods.find((m) => m.name === "WatchJob")?.methodKind).toBe("server_streaming")
    expect(service?.methods.find((m) => m.name === "FetchJobWeights")?.methodKind).toBe(
      "server_streaming",
    )
    expect(byMethod?.messageResponse.case).toBe("fileDescriptorResponse")
    if (byName?.messageResponse.case !== "fileDescriptorResponse") throw new Error("no file")
    expect(
      fromBinary(
        FileDescriptorProtoSchema,
        byName.messageResponse.value.fileDescriptorProto[0] ?? new Uint8Array(),
      ).name,
    ).toBe("t1/v1/common.proto")
    expect(missing?.messageResponse).toMatchObject({
      case: "errorResponse",
      value: { errorCode: grpc.status.NOT_FOUND },
    })
  })

  it("graceful shutdown ends open watch streams with UNAVAILABLE", async () => {
    const gw = await h.start()
    const client = gw.client()
    const { jobId } = await client.submitJob({ spec: evalSpec() })
    const seen: bigint[] = []
    const watching = (async () => {
      for await (const event of client.watchJob({ jobId })) seen.push(event.seq)
    })()
    const outcome = rejection(watching)
    await new Promise((r) => setTimeout(r, 200))
    const started = Date.now()
    await gw.stop()
    const error = await outcome
    expect(error.code).toBe(grpc.status.UNAVAILABLE)
    expect(seen).toEqual([1n])
    expect(Date.now() - started).toBeLessThan(1500)
    // The gateway is gone.
    const after = await rejection(
      jobServiceClient(gw.endpoint.address, { timeoutMs: 500 }).getJob({ jobId }),
    )
    expect([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED]).toContain(after.code)
  })

  it("records request metrics and open watch streams", async () => {
    const gw = await h.start()
    const client = gw.client()
    await client.submitJob({ spec: evalSpec() })
    await rejection(client.getJob({ jobId: "job-x" }))
    const text = await h.metrics.registry.metrics()
    expect(text).toMatch(
      /t1_gateway_requests_total\{method="JobService\/SubmitJob",code="OK"\} \d+/,
    )
    expect(text).toMatch(
      /t1_gateway_requests_total\{method="JobService\/GetJob",code="NOT_FOUND"\} \d+/,
    )
    expect(text).toMatch(
      /t1_gateway_request_duration_seconds_count\{method="JobService\/SubmitJob"\} \d+/,
    )
    expect(text).toMatch(/t1_gateway_watch_streams 0/)
  })
})

describe.skipIf(!opensslAvailable)("gateway over TLS", () => {
  let dir = ""
  afterEach(() => {
    if (dir !== "") rmSync(dir, { recursive: true, force: true })
    dir = ""
  })

  const certificate = (subjectAltName: string) => {
    dir = dir === "" ? mkdtempSync(join(tmpdir(), "t1-gw-tls-")) : dir
    return selfSignedCertificate(dir, subjectAltName)
  }

  it("serves TLS with the given certificate; plaintext clients are refused", async () => {
    const { certFile, keyFile } = certificate("IP:127.0.0.1,DNS:localhost")
    const gw = await h.start({ tls: { certFile, keyFile } })
    expect(gw.endpoint.tls).toBe(true)
    const secure = gw.client({ tls: { ca: readFileSync(certFile), serverName: "localhost" } })
    const { jobId } = await secure.submitJob({ spec: evalSpec() })
    expect((await secure.getJob({ jobId })).status?.jobId).toBe(jobId)
    const plain = gw.client({ timeoutMs: 1000 })
    expect((await rejection(plain.getJob({ jobId }))).code).toBe(grpc.status.UNAVAILABLE)
  })

  it("checks the certificate against tls.serverName when given, in the job client", async () => {
    // A certificate for a DNS name only, reached at 127.0.0.1: only the override makes it match.
    const { certFile, keyFile } = certificate("DNS:gateway.t1.test")
    const gw = await h.start({ tls: { certFile, keyFile } })
    const ca = readFileSync(certFile)
    const named = gw.client({ tls: { ca, serverName: "gateway.t1.test" } })
    const { jobId } = await named.submitJob({ spec: evalSpec() })
    expect((await named.getJob({ jobId })).status?.jobId).toBe(jobId)
    const unnamed = gw.client({ tls: { ca }, timeoutMs: 2000 })
    expect((await rejection(unnamed.getJob({ jobId }))).code).toBe(grpc.status.UNAVAILABLE)
  })
})
