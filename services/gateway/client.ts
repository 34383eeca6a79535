/**
 * A typed client of t1.v1.JobService, for the CLI (`t1 submit/watch/jobs/cancel`), tests and
 * tools:
 *
 *   const client = jobServiceClient("127.0.0.1:50051", { token })
 *   const { jobId } = await client.submitJob({ spec: { kind: JobKind.EVAL, taskSet: "x" } })
 *   for await (const event of client.watchJob({ jobId, fromSeq: 1n })) console.log(event.seq)
 *   client.close()
 *
 * Requests are protobuf-es init objects (or messages); responses are messages. A failed call
 * rejects with {@link GatewayCallError} (its gRPC code, details, and for INVALID_ARGUMENT the
 * offending field paths). `client.effect` has the same calls as Effects and WatchJob as a Stream.
 */
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import {
  type DescMessage,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { Data, Effect, type Scope, Stream } from "effect"
import {
  type CancelJobResponse,
  type ErrorDetail,
  ErrorDetailSchema,
  type FetchJobWeightsResponse,
  type GetJobResponse,
  type JobEvent,
  JobService,
  type ListJobsResponse,
  type SubmitJobResponse,
} from "../../proto/index.ts"
import { codec } from "./grpc-adapter.ts"
import { ERROR_DETAIL_TRAILER, FIELD_PATH_TRAILER } from "./status.ts"

export interface JobServiceClientOptions {
  /** Sent as `authorization: Bearer <token>`. */
  readonly token?: string
  /** true: TLS verified against the system roots; an object: against this CA (PEM). */
  readonly tls?:
    | boolean
    | {
        readonly ca?: Uint8Array
        readonly caFile?: string
        /** Name the server certificate must carry, when it differs from the address's host. */
        readonly serverName?: string
      }
  /** Deadline of each unary call; default 30 s. WatchJob has none. */
  readonly timeoutMs?: number
}

/** A call that ended with a non-OK gRPC status. */
export class GatewayCallError extends Data.TaggedError("GatewayCallError")<{
  readonly code: grpc.status
  readonly details: string
  /** INVALID_ARGUMENT: the offending fields, first one first (`spec.learner.clip_eps`). */
  readonly fieldPaths: ReadonlyArray<string>
  readonly detail: ErrorDetail | undefined
}> {
  get codeName(): string {
    return grpc.status[this.code] ?? String(this.code)
  }
  get fieldPath(): string | undefined {
    return this.detail?.fieldPath || this.fieldPaths[0]
  }
  override get message(): string {
    return `${this.codeName}: ${this.details}`
  }
}

const isServiceError = (error: unknown): error is grpc.ServiceError =>
  error instanceof Error && "code" in error && typeof error.code === "number"

/** A grpc-js call failure as a GatewayCallError (code, details, field paths, ErrorDetail). */
export const toCallError = (error: unknown): GatewayCallError => {
  if (error instanceof GatewayCallError) return error
  if (!isServiceError(error)) {
    return new GatewayCallError({
      code: grpc.status.UNKNOWN,
      details: error instanceof Error ? error.message : String(error),
      fieldPaths: [],
      detail: undefined,
    })
  }
  // Several values of one metadata key arrive joined by ", " (HTTP/2 header folding).
  const paths = (error.metadata?.get(FIELD_PATH_TRAILER) ?? [])
    .flatMap((v) => String(v).split(/,\s*/))
    .filter((v) => v !== "")
  const raw = error.metadata?.get(ERROR_DETAIL_TRAILER)[0]
  let detail: ErrorDetail | undefined
  if (raw instanceof Buffer) {
    try {
      detail = fromBinary(ErrorDetailSchema, raw)
    } catch {
      detail = undefined
    }
  }
  return new GatewayCallError({
    code: error.code,
    details: error.details,
    fieldPaths: paths,
    detail,
  })
}

type Init<D extends DescMessage> = MessageInitShape<D>
type M = (typeof JobService)["method"]

export interface JobServiceClient {
  readonly address: string
  readonly submitJob: (request: Init<M["submitJob"]["input"]>) => Promise<SubmitJobResponse>
  readonly getJob: (request: Init<M["getJob"]["input"]>) => Promise<GetJobResponse>
  readonly cancelJob: (request: Init<M["cancelJob"]["input"]>) => Promise<CancelJobResponse>
  readonly listJobs: (request: Init<M["listJobs"]["input"]>) => Promise<ListJobsResponse>
  /**
   * The job's events from `fromSeq` on; the iteration ends after the job's terminal event.
   * Leaving the loop early cancels the call. A gateway that shuts down ends it with
   * UNAVAILABLE: watch again from the last seq + 1.
   */
  readonly watchJob: (request: Init<M["watchJob"]["input"]>) => AsyncIterable<JobEvent>
  /**
   * The job's weights file at a version (the latest unless `policyVersion`): the first chunk as
   * the head (version, step, size, digest) and the bytes, their size and digest checked.
   */
  readonly fetchJobWeights: (
    request: Init<M["fetchJobWeights"]["input"]>,
  ) => Promise<{ readonly head: FetchJobWeightsResponse; readonly bytes: Uint8Array }>
  readonly effect: {
    readonly submitJob: (
      request: Init<M["submitJob"]["input"]>,
    ) => Effect.Effect<SubmitJobResponse, GatewayCallError>
    readonly getJob: (
      request: Init<M["getJob"]["input"]>,
    ) => Effect.Effect<GetJobResponse, GatewayCallError>
    readonly cancelJob: (
      request: Init<M["cancelJob"]["input"]>,
    ) => Effect.Effect<CancelJobResponse, GatewayCallError>
    readonly listJobs: (
      request: Init<M["listJobs"]["input"]>,
    ) => Effect.Effect<ListJobsResponse, GatewayCallError>
    readonly watchJob: (
      request: Init<M["watchJob"]["input"]>,
    ) => Stream.Stream<JobEvent, GatewayCallError>
    readonly fetchJobWeights: (
      request: Init<M["fetchJobWeights"]["input"]>,
    ) => Effect.Effect<
      { readonly head: FetchJobWeightsResponse; readonly bytes: Uint8Array },
      GatewayCallError
    >
  }
  readonly close: () => void
}

export const channelCredentials = (tls: JobServiceClientOptions["tls"]) => {
  if (tls === undefined || tls === false) return grpc.credentials.createInsecure()
  if (tls === true) return grpc.credentials.createSsl()
  const ca = tls.ca ?? (tls.caFile === undefined ? undefined : readFileSync(tls.caFile))
  return grpc.credentials.createSsl(ca === undefined ? null : Buffer.from(ca))
}

/**
 * The grpc-js channel options every t1 client uses: its own connection, and the TLS server name
 * when one is given.
 */
export const channelOptions = (options: JobServiceClientOptions): grpc.ChannelOptions => ({
  ...(typeof options.tls === "object" && options.tls.serverName !== undefined
    ? { "grpc.ssl_target_name_override": options.tls.serverName }
    : {}),
  // grpc-js otherwise shares one connection among all clients of an address and keeps it open
  // for a while after close(): a client's calls would count against its neighbours' on the
  // server's HTTP/2 limits (Node's server sends GOAWAY INTERNAL_ERROR to a connection that
  // cancels more than 1000 streams in a burst: its "rapid reset" guard).
  "grpc.use_local_subchannel_pool": 1,
})

/** Fresh call metadata with `authorization: Bearer <token>` when a token is given. */
export const bearer = (token: string | undefined) => (): grpc.Metadata => {
  const m = new grpc.Metadata()
  if (token !== undefined) m.set("authorization", `Bearer ${token}`)
  return m
}

/**
 * Unary calls of `service` over `client` as Promises: the request serialised by its schema,
 * a deadline of `timeoutMs`, a failure as GatewayCallError; `signal` cancels the call.
 */
export const unaryCaller =
  (client: grpc.Client, service: string, metadata: () => grpc.Metadata, timeoutMs: number) =>
  <I extends DescMessage, O extends DescMessage>(method: {
    readonly name: string
    readonly input: I
    readonly output: O
  }) =>
  (request: Init<I>, signal?: AbortSignal): Promise<MessageShape<O>> =>
    new Promise((resolve, reject) => {
      const input = codec(method.input)
      const call = client.makeUnaryRequest(
        `/${service}/${method.name}`,
        (value: Init<I>) => input.serialize(value),
        codec(method.output).deserialize,
        request,
        metadata(),
        { deadline: Date.now() + timeoutMs },
        (error, response) => {
          if (error !== null || response === undefined) reject(toCallError(error))
          else resolve(response)
        },
      )
      signal?.addEventListener("abort", () => call.cancel(), { once: true })
    })

/**
 * A client of the gateway at `address` (`host:port`); one HTTP/2 connection of its own, reused
 * for every call and closed by `close()`.
 */
export const jobServiceClient = (
  address: string,
  options: JobServiceClientOptions = {},
): JobServiceClient => {
  const client = new grpc.Client(address, channelCredentials(options.tls), channelOptions(options))
  const timeoutMs = options.timeoutMs ?? 30_000
  const metadata = bearer(options.token)
  const unary = unaryCaller(client, JobService.typeName, metadata, timeoutMs)

  const watchJob = (request: Init<M["watchJob"]["input"]>): AsyncIterable<JobEvent> => ({
    async *[Symbol.asyncIterator]() {
      const method = JobService.method.watchJob
      const input = codec(method.input)
      const call = client.makeServerStreamRequest(
        `/${JobService.typeName}/${method.name}`,
        (value: Init<M["watchJob"]["input"]>) => input.serialize(value),
        codec(method.output).deserialize,
        request,
        metadata(),
        {},
      )
      try {
        for await (const response of call) {
          const message: MessageShape<M["watchJob"]["output"]> = response
          if (message.event !== undefined) yield message.event
        }
      } catch (error) {
        throw toCallError(error)
      } finally {
        // Early exit: the status that follows the cancel has nobody to report to.
        call.on("error", () => {})
        call.cancel()
      }
    },
  })

  const fetchJobWeights = (
    request: Init<M["fetchJobWeights"]["input"]>,
    signal?: AbortSignal,
  ): Promise<{ readonly head: FetchJobWeightsResponse; readonly bytes: Uint8Array }> =>
    new Promise((resolve, reject) => {
      const method = JobService.method.fetchJobWeights
      const call = client.makeServerStreamRequest(
        `/${JobService.typeName}/${method.name}`,
        (value: Init<M["fetchJobWeights"]["input"]>) => codec(method.input).serialize(value),
        codec(method.output).deserialize,
        request,
        metadata(),
        {},
      )
      signal?.addEventListener("abort", () => call.cancel(), { once: true })
      const parts: Uint8Array[] = []
      let head: FetchJobWeightsResponse | undefined
      call.on("data", (chunk: FetchJobWeightsResponse) => {
        head ??= chunk
        parts.push(chunk.data)
      })
      call.on("error", (e) => reject(toCallError(e)))
      call.on("end", () => {
        if (head === undefined) {
          reject(toCallError(new Error("FetchJobWeights ended without a chunk")))
          return
        }
        const bytes = Buffer.concat(parts)
        const digest = createHash("sha256").update(bytes).digest("hex")
        if (BigInt(bytes.length) !== head.sizeBytes || digest !== head.sha256)
          reject(
            toCallError(
              new Error(
                `FetchJobWeights: received ${bytes.length} bytes hashing to ${digest}; announced ${head.sizeBytes} bytes ${head.sha256}`,
              ),
            ),
          )
        else resolve({ head, bytes: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length) })
      })
    })

  const submitJob = unary(JobService.method.submitJob)
  const getJob = unary(JobService.method.getJob)
  const cancelJob = unary(JobService.method.cancelJob)
  const listJobs = unary(JobService.method.listJobs)
  const lift =
    <I, O>(f: (request: I, signal?: AbortSignal) => Promise<O>) =>
    (request: I): Effect.Effect<O, GatewayCallError> =>
      Effect.tryPromise({ try: (signal) => f(request, signal), catch: toCallError })

  return {
    address,
    submitJob: (r) => submitJob(r),
    getJob: (r) => getJob(r),
    cancelJob: (r) => cancelJob(r),
    listJobs: (r) => listJobs(r),
    watchJob,
    fetchJobWeights: (r) => fetchJobWeights(r),
    effect: {
      submitJob: lift(submitJob),
      getJob: lift(getJob),
      cancelJob: lift(cancelJob),
      listJobs: lift(listJobs),
      watchJob: (r) => Stream.fromAsyncIterable(watchJob(r), toCallError),
      fetchJobWeights: lift(fetchJobWeights),
    },
    close: () => client.close(),
  }
}

/** A client closed with the scope. */
export const jobServiceClientScoped = (
  address: string,
  options: JobServiceClientOptions = {},
): Effect.Effect<JobServiceClient, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => jobServiceClient(address, options)),
    (client) => Effect.sync(() => client.close()),
  )
