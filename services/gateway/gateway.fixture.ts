import { spawnSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { join } from "node:path"
import type { DescMessage, MessageInitShape, MessageShape } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { type Context, Effect, Exit, Layer, References, Scope } from "effect"
import { Bus, type BusError, type Subjects, subjectsFor } from "../bus/index.ts"
import { type JobStoreShape, makeJobStore } from "../jobs/index.ts"
import { Metrics, type MetricsShape, makeMetrics } from "../metrics/index.ts"
import { type JobServiceClient, type JobServiceClientOptions, jobServiceClient } from "./client.ts"
import { codec } from "./grpc-adapter.ts"
import { type GatewayEndpoint, type GatewayOptions, serveGateway } from "./server.ts"

export interface RunningGateway {
  readonly endpoint: GatewayEndpoint
  readonly client: (options?: JobServiceClientOptions) => JobServiceClient
  /** Graceful shutdown (closes the gateway's scope). */
  readonly stop: () => Promise<void>
}

/** One bus (and metrics registry) shared by any number of gateways, as separate processes would. */
export interface GatewayHarness {
  readonly subjects: Subjects
  readonly metrics: MetricsShape
  readonly run: <A, E>(effect: Effect.Effect<A, E, Bus | Metrics>) => Promise<A>
  readonly store: () => Promise<JobStoreShape>
  readonly start: (options?: Partial<GatewayOptions>) => Promise<RunningGateway>
  readonly close: () => Promise<void>
}

export const gatewayHarness = async (
  bus: Layer.Layer<Bus, BusError>,
  prefix = `g${randomUUID().replaceAll("-", "").slice(0, 10)}`,
): Promise<GatewayHarness> => {
  const subjects = subjectsFor(prefix)
  const metrics = makeMetrics({ defaultMetrics: false })
  const scope = await Effect.runPromise(Scope.make())
  const layer = Layer.mergeAll(bus, Layer.succeed(Metrics, metrics))
  const context: Context.Context<Bus | Metrics> = await Effect.runPromise(
    Layer.buildWithScope(layer, scope),
  )
  const run = <A, E>(effect: Effect.Effect<A, E, Bus | Metrics>) =>
    Effect.runPromise(
      effect.pipe(
        Effect.provideContext(context),
        Effect.provideService(References.MinimumLogLevel, "Error"),
      ),
    )
  const clients: JobServiceClient[] = []
  const gateways: RunningGateway[] = []
  const start = async (options: Partial<GatewayOptions> = {}): Promise<RunningGateway> => {
    const gatewayScope = await Effect.runPromise(Scope.make())
    const endpoint = await run(
      serveGateway({
        subjects,
        port: 0,
        shutdownGraceMs: 2_000,
        healthCheckEvery: "200 millis",
        ...options,
      }).pipe(Scope.provide(gatewayScope)),
    )
    let stopped: Promise<void> | undefined
    const running: RunningGateway = {
      endpoint,
      client: (clientOptions) => {
        const c = jobServiceClient(endpoint.address, clientOptions)
        clients.push(c)
        return c
      },
      stop: () => {
        stopped ??= run(Scope.close(gatewayScope, Exit.void))
        return stopped
      },
    }
    gateways.push(running)
    return running
  }
  return {
    subjects,
    metrics,
    run,
    store: () => run(Bus.use((b) => makeJobStore(b, subjects))),
    start,
    close: async () => {
      for (const c of clients) c.close()
      await Promise.all(gateways.map((g) => g.stop()))
      await Effect.runPromise(Scope.close(scope, Exit.void))
    },
  }
}

/** A plain grpc-js client for the infrastructure services (health, reflection) in tests. */
export const rawClient = (address: string, credentials = grpc.credentials.createInsecure()) => {
  const client = new grpc.Client(address, credentials)
  const unary = <I extends DescMessage, O extends DescMessage>(
    path: string,
    input: I,
    output: O,
    request: MessageInitShape<I>,
  ) =>
    new Promise<MessageShape<O>>((resolve, reject) => {
      client.makeUnaryRequest(
        path,
        codec(input).serialize,
        codec(output).deserialize,
        request,
        new grpc.Metadata(),
        { deadline: Date.now() + 5_000 },
        (error, response) =>
          error === null && response !== undefined ? resolve(response) : reject(error),
      )
    })
  const serverStream = <I extends DescMessage, O extends DescMessage>(
    path: string,
    input: I,
    output: O,
    request: MessageInitShape<I>,
  ) =>
    client.makeServerStreamRequest(
      path,
      codec(input).serialize,
      codec(output).deserialize,
      request,
      new grpc.Metadata(),
      {},
    )
  /** Sends each request in turn on one bidirectional stream; resolves with the answers. */
  const exchange = <I extends DescMessage, O extends DescMessage>(
    path: string,
    input: I,
    output: O,
    requests: ReadonlyArray<MessageInitShape<I>>,
  ) =>
    new Promise<MessageShape<O>[]>((resolve, reject) => {
      const call = client.makeBidiStreamRequest(
        path,
        codec(input).serialize,
        codec(output).deserialize,
        new grpc.Metadata(),
        { deadline: Date.now() + 5_000 },
      )
      const answers: MessageShape<O>[] = []
      call.on("data", (answer: MessageShape<O>) => answers.push(answer))
      call.on("error", reject)
      call.on("end", () => resolve(answers))
      for (const r of requests) call.write(r)
      call.end()
    })
  return { unary, serverStream, exchange, close: () => client.close() }
}

export const opensslAvailable = spawnSync("openssl", ["version"], { stdio: "ignore" }).status === 0

/** A self-signed certificate (and its key) for `subjectAltName`, written into `dir`. */
export const selfSignedCertificate = (
  dir: string,
  subjectAltName: string,
): { readonly certFile: string; readonly keyFile: string } => {
  const name = subjectAltName.replace(/[^a-z0-9]/gi, "_")
  const certFile = join(dir, `${name}.cert.pem`)
  const keyFile = join(dir, `${name}.key.pem`)
  const made = spawnSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      keyFile,
      "-out",
      certFile,
      "-days",
      "1",
      "-subj",
      "/CN=t1-test",
      "-addext",
      `subjectAltName=${subjectAltName}`,
    ],
    { stdio: "ignore" },
  )
  if (made.status !== 0)
    throw new Error(`openssl could not make a certificate for ${subjectAltName}`)
  return { certFile, keyFile }
}
