import type * as grpc from "@grpc/grpc-js"
import { Cause, Effect, Exit, Fiber, FiberSet, type Scope } from "effect"
import type { GatewayMetrics } from "./metrics.ts"
import { failureOf, failureOfCause, type GrpcFailure } from "./status.ts"

/**
 * Runs gRPC handlers as Effect fibers of the gateway's scope, answers every call with a status
 * derived from how its effect ended, and records the call's metrics. Unary calls are left to
 * finish when the gateway stops; streams are ended (UNAVAILABLE) by {@link CallRunner.endStreams}.
 */
export interface CallRunner {
  readonly unary: <Req, Res>(
    method: string,
    handler: (call: grpc.ServerUnaryCall<Req, Res>) => Effect.Effect<Res, unknown>,
  ) => grpc.handleUnaryCall<Req, Res>
  /** `write` waits while the client is not reading (transport backpressure). */
  readonly serverStream: <Req, Res>(
    method: string,
    handler: (
      call: grpc.ServerWritableStream<Req, Res>,
      write: (message: Res) => Effect.Effect<void>,
    ) => Effect.Effect<void, unknown>,
  ) => grpc.handleServerStreamingCall<Req, Res>
  /**
   * A client stream answered once: the handler reads the requests as an async iterable (ended
   * when the client half-closes; a client that cancels ends it with an error).
   */
  readonly clientStream: <Req, Res>(
    method: string,
    handler: (call: grpc.ServerReadableStream<Req, Res>) => Effect.Effect<Res, unknown>,
  ) => grpc.handleClientStreamingCall<Req, Res>
  /**
   * A bidirectional stream that answers each request with one response, synchronously (a thrown
   * error ends the call with its status); it ends when the client half-closes.
   */
  readonly duplex: <Req, Res>(
    method: string,
    answer: (request: Req) => Res,
  ) => grpc.handleBidiStreamingCall<Req, Res>
  /** Ends every open stream with UNAVAILABLE; waits until the server streams have ended. */
  readonly endStreams: Effect.Effect<void>
}

const writeTo =
  <Res>(call: grpc.ServerWritableStream<unknown, Res>) =>
  (message: Res): Effect.Effect<void> =>
    Effect.callback<void>((resume) => {
      if (call.write(message)) {
        resume(Effect.void)
        return
      }
      const drained = () => resume(Effect.void)
      call.once("drain", drained)
      return Effect.sync(() => {
        call.off("drain", drained)
      })
    })

export const makeCallRunner = (
  metrics: GatewayMetrics,
): Effect.Effect<CallRunner, never, Scope.Scope> =>
  Effect.gen(function* () {
    const unaryFibers = yield* FiberSet.make()
    const streamFibers = yield* FiberSet.make()
    const runUnary = yield* FiberSet.runtime(unaryFibers)()
    const runStream = yield* FiberSet.runtime(streamFibers)()

    const logFailure = (method: string, details: string) =>
      Effect.logError(`gateway: ${method} failed: ${details}`)

    /** Answers a call once from how its handler ended, and records the call. */
    const answer =
      <Res>(method: string, started: number, callback: grpc.sendUnaryData<Res>) =>
      (exit: Exit.Exit<Res, unknown>): Effect.Effect<void> =>
        Effect.suspend(() => {
          if (Exit.isSuccess(exit)) {
            callback(null, exit.value)
            metrics.observe(method, 0, started)
            return Effect.void
          }
          const failure = failureOfCause(exit.cause)
          callback({ code: failure.code, details: failure.details, metadata: failure.metadata })
          metrics.observe(method, failure.code, started)
          return failure.internal ? logFailure(method, failure.details) : Effect.void
        })

    const unary: CallRunner["unary"] = (method, handler) => (call, callback) => {
      const started = performance.now()
      runUnary(
        Effect.suspend(() => handler(call)).pipe(Effect.onExit(answer(method, started, callback))),
      )
    }

    const serverStream: CallRunner["serverStream"] = (method, handler) => (call) => {
      const started = performance.now()
      const fiber = runStream(
        Effect.suspend(() => handler(call, writeTo(call))).pipe(
          Effect.onExit((exit) =>
            Effect.suspend(() => {
              if (call.cancelled) {
                // The client went away: nobody to answer.
                metrics.observe(method, 1, started)
                return Effect.void
              }
              if (Exit.isSuccess(exit)) {
                call.end()
                metrics.observe(method, 0, started)
                return Effect.void
              }
              const failure = failureOfCause(exit.cause)
              call.emit("error", {
                code: failure.code,
                details: failure.details,
                metadata: failure.metadata,
              })
              metrics.observe(method, failure.code, started)
              return failure.internal ? logFailure(method, failure.details) : Effect.void
            }),
          ),
        ),
      )
      call.on("cancelled", () => {
        Effect.runFork(Fiber.interrupt(fiber))
      })
    }

    const clientStream: CallRunner["clientStream"] = (method, handler) => (call, callback) => {
      const started = performance.now()
      const answered = answer(method, started, callback)
      const fiber = runStream(
        Effect.suspend(() => handler(call)).pipe(
          Effect.onExit((exit) =>
            Effect.suspend(() => {
              if (!call.cancelled) return answered(exit)
              // The client went away: nobody to answer.
              metrics.observe(method, 1, started)
              return Effect.void
            }),
          ),
        ),
      )
      call.on("cancelled", () => {
        Effect.runFork(Fiber.interrupt(fiber))
      })
    }

    const openDuplex = new Set<() => void>()
    const duplex: CallRunner["duplex"] = (method, answer) => (call) => {
      const started = performance.now()
      let done = false
      const finish = (code: grpc.status) => {
        if (done) return false
        done = true
        openDuplex.delete(shutdown)
        metrics.observe(method, code, started)
        return true
      }
      const fail = (f: GrpcFailure) => {
        if (finish(f.code)) {
          call.emit("error", { code: f.code, details: f.details, metadata: f.metadata })
        }
      }
      const shutdown = () => fail(failureOfCause(Cause.interrupt()))
      openDuplex.add(shutdown)
      call.on("data", (request: Parameters<typeof answer>[0]) => {
        if (done) return
        try {
          call.write(answer(request))
        } catch (error) {
          fail(failureOf(error))
        }
      })
      call.on("end", () => {
        if (finish(0)) call.end()
      })
      call.on("cancelled", () => finish(1))
    }

    const endStreams = Effect.suspend(() => {
      for (const shutdown of [...openDuplex]) shutdown()
      return FiberSet.clear(streamFibers)
    })

    return { unary, serverStream, clientStream, duplex, endStreams }
  })
