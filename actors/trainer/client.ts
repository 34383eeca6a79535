/**
 * A typed client of t1.v1.TrainerService, for TypeScript trainers and the tests: every call a
 * Promise that rejects with GatewayCallError. `publishWeights` sends a header and the bytes in
 * chunks; `openPublish` gives the raw stream (a test can end or cancel it early);
 * `resolveBatch` fetches the trajectories a batch serves by reference (FetchTrajectory).
 */
import { createHash } from "node:crypto"
import {
  type DescMessage,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import {
  type Batch,
  type FetchWeightsResponse,
  type PublishWeightsResponse,
  TrainerService,
  type Trajectory,
  TrajectorySchema,
} from "../../proto/index.ts"
import {
  bearer,
  channelCredentials,
  channelOptions,
  codec,
  type JobServiceClientOptions,
  toCallError,
  unaryCaller,
} from "../../services/gateway/index.ts"

type Init<D extends DescMessage> = MessageInitShape<D>
type M = (typeof TrainerService)["method"]

export interface PublishStream {
  readonly send: (part: Init<M["publishWeights"]["input"]>) => void
  /** Half-closes the stream and waits for the answer. */
  readonly end: () => Promise<PublishWeightsResponse>
  /** Cancels the call (a trainer that died mid-upload). */
  readonly cancel: () => void
}

export const trainerServiceClient = (address: string, options: JobServiceClientOptions = {}) => {
  const client = new grpc.Client(address, channelCredentials(options.tls), {
    ...channelOptions(options),
    "grpc.max_receive_message_length": -1,
  })
  const timeoutMs = options.timeoutMs ?? 60_000
  const metadata = bearer(options.token)
  const path = (name: string) => `/${TrainerService.typeName}/${name}`
  const unary = unaryCaller(client, TrainerService.typeName, metadata, timeoutMs)

  /** A server-streaming call's chunks: the first as the head, the `data` of all concatenated. */
  const chunks = <I extends DescMessage, O extends DescMessage & { readonly typeName: string }>(
    method: { readonly name: string; readonly input: I; readonly output: O },
    request: Init<I>,
  ): Promise<{ readonly head: MessageShape<O>; readonly bytes: Uint8Array }> =>
    new Promise((resolve, reject) => {
      const call = client.makeServerStreamRequest(
        path(method.name),
        (value: Init<I>) => codec(method.input).serialize(value),
        codec(method.output).deserialize,
        request,
        metadata(),
        { deadline: Date.now() + timeoutMs },
      )
      const parts: Uint8Array[] = []
      let head: MessageShape<O> | undefined
      call.on("data", (chunk: MessageShape<O> & { readonly data: Uint8Array }) => {
        head ??= chunk
        parts.push(chunk.data)
      })
      call.on("error", (e) => reject(toCallError(e)))
      call.on("end", () => {
        if (head === undefined) reject(new Error(`${method.name} ended without a chunk`))
        else resolve({ head, bytes: Buffer.concat(parts) })
      })
    })

  /** A trajectory a batch serves by reference, its digest checked. */
  const fetchTrajectory = async (
    request: Init<M["fetchTrajectory"]["input"]>,
  ): Promise<Trajectory> => {
    const { head, bytes } = await chunks(TrainerService.method.fetchTrajectory, request)
    const digest = createHash("sha256").update(bytes).digest("hex")
    if (BigInt(bytes.length) !== head.sizeBytes || digest !== head.sha256)
      throw new Error(
        `FetchTrajectory: ${bytes.length} bytes hashing to ${digest}, announced ${head.sizeBytes} bytes ${head.sha256}`,
      )
    return fromBinary(TrajectorySchema, bytes)
  }

  const openPublish = (): PublishStream => {
    const method = TrainerService.method.publishWeights
    let settle: { resolve: (r: PublishWeightsResponse) => void; reject: (e: unknown) => void }
    const answered = new Promise<PublishWeightsResponse>((resolve, reject) => {
      settle = { resolve, reject }
    })
    const call = client.makeClientStreamRequest(
      path(method.name),
      (value: Init<M["publishWeights"]["input"]>) => codec(method.input).serialize(value),
      codec(method.output).deserialize,
      metadata(),
      { deadline: Date.now() + timeoutMs },
      (error, response) => {
        if (error !== null || response === undefined) settle.reject(toCallError(error))
        else settle.resolve(response)
      },
    )
    // A cancelled call's rejection is the caller's to ignore.
    answered.catch(() => undefined)
    return {
      send: (part) => call.write(part),
      end: () => {
        call.end()
        return answered
      },
      cancel: () => call.cancel(),
    }
  }

  return {
    claimJob: unary(TrainerService.method.claimJob),
    takeBatch: unary(TrainerService.method.takeBatch),
    publishWeightsRef: unary(TrainerService.method.publishWeightsRef),
    reportStep: unary(TrainerService.method.reportStep),
    /** The job's weights file (the latest version unless `policyVersion`), its digest checked by the caller. */
    fetchWeights: (
      request: Init<M["fetchWeights"]["input"]>,
    ): Promise<{ readonly head: FetchWeightsResponse; readonly bytes: Uint8Array }> =>
      chunks(TrainerService.method.fetchWeights, request),
    fetchTrajectory,
    /**
     * The batch with its `trajectory_refs` fetched and appended to `trajectories` (batch order,
     * so `weights` lines up), as the buffer client resolves them for t1's learner.
     */
    resolveBatch: async (jobId: string, leaseId: string, batch: Batch): Promise<Batch> => {
      const fetched = await Promise.all(
        batch.trajectoryRefs.map((ref) => fetchTrajectory({ jobId, leaseId, ref })),
      )
      return { ...batch, trajectories: [...batch.trajectories, ...fetched], trajectoryRefs: [] }
    },
    openPublish,
    /** Header, then the bytes in chunks of `chunkBytes` (default 1 MiB). */
    publishWeights: (
      header: {
        readonly jobId: string
        readonly leaseId: string
        readonly policyVersion: bigint
        readonly step: bigint
        readonly format?: string
        readonly sha256?: string
        readonly batchIds?: ReadonlyArray<string>
      },
      bytes: Uint8Array,
      chunkBytes = 1 << 20,
    ): Promise<PublishWeightsResponse> => {
      const stream = openPublish()
      stream.send({
        part: {
          case: "header",
          value: {
            ...header,
            format: header.format ?? "safetensors",
            batchIds: [...(header.batchIds ?? [])],
            sizeBytes: BigInt(bytes.length),
          },
        },
      })
      for (let at = 0; at < bytes.length; at += chunkBytes)
        stream.send({ part: { case: "data", value: bytes.subarray(at, at + chunkBytes) } })
      return stream.end()
    },
    close: () => client.close(),
  }
}

export type TrainerServiceClient = ReturnType<typeof trainerServiceClient>
