import { create } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { type Duration, Effect, Option, type Scope, Stream, SubscriptionRef } from "effect"
import type { CallRunner } from "./calls.ts"
import {
  Health,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "./gen/grpc/health/v1/health_pb.ts"
import type { ServiceHandlers } from "./grpc-adapter.ts"
import { StatusError } from "./status.ts"

export { Health, ServingStatus }

export interface Serving {
  readonly status: SubscriptionRef.SubscriptionRef<ServingStatus>
  /** NOT_SERVING from now on: the gateway is shutting down. */
  readonly stop: Effect.Effect<void>
}

/**
 * The gateway's serving status: SERVING while `probe` (a job-store read) answers within
 * `timeout`, NOT_SERVING otherwise, checked every `every`; the first check runs before this
 * returns.
 */
export const servingStatus = (
  probe: Effect.Effect<unknown, unknown>,
  every: Duration.Input,
  timeout: Duration.Input,
): Effect.Effect<Serving, never, Scope.Scope> =>
  Effect.gen(function* () {
    let stopping = false
    const check = probe.pipe(
      Effect.timeoutOption(timeout),
      Effect.map((r) => (Option.isSome(r) ? ServingStatus.SERVING : ServingStatus.NOT_SERVING)),
      Effect.catchCause(() => Effect.succeed(ServingStatus.NOT_SERVING)),
    )
    const status = yield* SubscriptionRef.make(yield* check)
    const update = Effect.gen(function* () {
      const next = yield* check
      if (stopping) return
      const current = yield* SubscriptionRef.get(status)
      if (current === next) return
      yield* SubscriptionRef.set(status, next)
      yield* next === ServingStatus.SERVING
        ? Effect.logInfo("gateway: job store reachable again, SERVING")
        : Effect.logWarning("gateway: job store unreachable, NOT_SERVING")
    })
    yield* Effect.forkScoped(Effect.forever(Effect.delay(update, every)))
    const stop = Effect.suspend(() => {
      stopping = true
      return SubscriptionRef.set(status, ServingStatus.NOT_SERVING)
    })
    return { status, stop }
  })

/**
 * grpc.health.v1.Health for the named services (and "" for the whole server), all sharing one
 * status. Check answers NOT_FOUND for other services; Watch sends SERVICE_UNKNOWN for them.
 */
export const healthHandlers = (
  runner: CallRunner,
  status: SubscriptionRef.SubscriptionRef<ServingStatus>,
  services: ReadonlyArray<string>,
): ServiceHandlers<(typeof Health)["method"]> => {
  const known = new Set(["", ...services])
  const response = (s: ServingStatus) => create(HealthCheckResponseSchema, { status: s })
  return {
    check: runner.unary("Health/Check", (call) =>
      known.has(call.request.service)
        ? Effect.map(SubscriptionRef.get(status), response)
        : Effect.fail(
            new StatusError({
              code: grpc.status.NOT_FOUND,
              details: `unknown service ${JSON.stringify(call.request.service)}`,
            }),
          ),
    ),
    watch: runner.serverStream("Health/Watch", (call, write) =>
      known.has(call.request.service)
        ? SubscriptionRef.changes(status).pipe(
            Stream.changes,
            Stream.runForEach((s) => write(response(s))),
          )
        : Effect.andThen(write(response(ServingStatus.SERVICE_UNKNOWN)), Effect.never),
    ),
  }
}
