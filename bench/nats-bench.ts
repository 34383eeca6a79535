/**
 * What the NATS benchmarks (bench:bus, bench:stream) share: option errors, a typed failure, the
 * median of rounds, and the server and connections they measure through.
 */
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Context, Data, Effect, Layer, type Scope } from "effect"
import { Bus, type BusShape, NatsBusLive } from "../services/bus/index.ts"
import { startTestNatsCluster } from "../test/support/nats-cluster.ts"
import { startNatsServer } from "../test/support/nats-server.ts"

export class UsageError extends Error {}

export const positiveInt = (name: string, value: string | undefined, fallback: number): number => {
  if (value === undefined) return fallback
  const n = Number(value)
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(`--${name} must be a positive integer, got '${value}'`)
  }
  return n
}

export class BenchError extends Data.TaggedError("BenchError")<{ readonly reason: string }> {}

export const benchError = (what: string) => (cause: unknown) =>
  new BenchError({ reason: `${what}: ${cause instanceof Error ? cause.message : String(cause)}` })

export const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2
}

/** T1_BENCH_NATS_URL when set, else a private nats-server on 127.0.0.1 for the scope. */
export const benchNats: Effect.Effect<
  { readonly url: string; readonly external: boolean },
  BenchError,
  Scope.Scope
> = Effect.gen(function* () {
  const external = process.env.T1_BENCH_NATS_URL
  if (external !== undefined && external !== "") return { url: external, external: true }
  const server = yield* Effect.acquireRelease(
    Effect.tryPromise({ try: () => startNatsServer(), catch: benchError("nats-server") }),
    (s) => Effect.promise(() => s.stop()),
  )
  return { url: server.url, external: false }
})

/**
 * A private three-node JetStream cluster on 127.0.0.1 for the scope (`--nats-cluster`): every
 * node's client URL, in node order.
 */
export const benchCluster: Effect.Effect<
  ReadonlyArray<string>,
  BenchError,
  Scope.Scope
> = Effect.map(
  Effect.acquireRelease(
    Effect.tryPromise({ try: () => startTestNatsCluster(), catch: benchError("nats cluster") }),
    (c) => Effect.promise(() => c.close()),
  ),
  (c) => c.nodes.map((n) => n.url),
)

/** A plain nats.js connection for the scope: the baseline's side. `url`: one or a,b,c. */
export const rawConnection = (
  url: string,
  name: string,
): Effect.Effect<NatsConnection, BenchError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () => connect({ servers: url.split(","), name }),
      catch: benchError(url),
    }),
    (nc) => Effect.promise(() => nc.close()),
  )

/** A t1 Bus on its own connection for the scope: t1's side. */
export const busConnection = (
  url: string,
  name: string,
): Effect.Effect<BusShape, BenchError, Scope.Scope> =>
  Layer.build(NatsBusLive({ servers: url, name })).pipe(
    Effect.map((ctx) => Context.get(ctx, Bus)),
    Effect.mapError(benchError(`bus ${url}`)),
  )
