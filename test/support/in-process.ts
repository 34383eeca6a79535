/**
 * What in-process system tests share: running a scoped effect on the layers a whole system in
 * one process uses (an in-memory bus, one job store over it, Prometheus metrics), and the gRPC
 * status name a call ended with.
 */
import * as grpc from "@grpc/grpc-js"
import { Effect, type Scope } from "effect"
import { Bus, MemoryBusLive, type Subjects } from "../../services/bus/index.ts"
import type { GatewayCallError } from "../../services/gateway/index.ts"
import { JobStore, makeJobStore } from "../../services/jobs/index.ts"
import { type Metrics, MetricsLive } from "../../services/metrics/index.ts"

/** Runs `effect` in a scope on an in-memory bus, one job store over it (`subjects`) and metrics. */
export const runInProcess = <A, E>(
  subjects: Subjects,
  effect: Effect.Effect<A, E, Bus | JobStore | Metrics | Scope.Scope>,
): Promise<A> =>
  Effect.runPromise(
    Effect.scoped(effect).pipe(
      Effect.provide(MetricsLive),
      Effect.provideServiceEffect(
        JobStore,
        Bus.use((bus) => makeJobStore(bus, subjects)),
      ),
      Effect.provide(MemoryBusLive()),
    ),
  )

/** "OK", or the name of the gRPC status the call was refused with (e.g. "INVALID_ARGUMENT"). */
export const grpcCode = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p
    return "OK"
  } catch (e) {
    return grpc.status[(e as GatewayCallError).code] ?? String(e)
  }
}
