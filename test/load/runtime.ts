/**
 * The load process's own NATS connection and metrics registry, as one Effect context that plain
 * async code runs effects in. The sampler runs here too, so its per-turn exec times are taken
 * from the very histogram it records them in.
 */
import { type Context, Effect, Exit, type Fiber, Layer, References, Scope } from "effect"
import { type Bus, NatsBusLive, type Subjects, subjectsFor } from "../../services/bus/index.ts"
import { Metrics, type MetricsShape, makeMetrics } from "../../services/metrics/index.ts"

/** Wraps a registry so that every value observed by the histogram `name` is also kept. */
const recordingHistogram = (inner: MetricsShape, name: string, sink: number[]): MetricsShape => ({
  ...inner,
  histogram: (spec) => {
    const histogram = inner.histogram(spec)
    if (spec.name !== name) return histogram
    return new Proxy(histogram, {
      get: (target, property, receiver) => {
        if (property !== "observe") return Reflect.get(target, property, receiver)
        // observe(value) or observe(labels, value): the value is the last number given.
        return (...args: ReadonlyArray<unknown>) => {
          const value = args.at(-1)
          if (typeof value === "number") sink.push(value)
          return Reflect.apply(target.observe, target, args)
        }
      },
    })
  },
})

export interface LoadRuntime {
  readonly subjects: Subjects
  /** Seconds of each turn's commands in the sandbox, as the in-process sampler recorded them. */
  readonly turnExecSeconds: number[]
  readonly run: <A, E>(effect: Effect.Effect<A, E, Bus | Metrics>) => Promise<A>
  readonly fork: <A, E>(effect: Effect.Effect<A, E, Bus | Metrics>) => Fiber.Fiber<A, E>
  /** Interrupts nothing by itself: interrupt forked fibers first, then close the connection. */
  readonly close: () => Promise<void>
}

export const loadRuntime = async (natsUrl: string, prefix: string): Promise<LoadRuntime> => {
  const turnExecSeconds: number[] = []
  const metrics = recordingHistogram(
    makeMetrics({ defaultMetrics: false }),
    "t1_sampler_turn_exec_seconds",
    turnExecSeconds,
  )
  const scope = await Effect.runPromise(Scope.make())
  const layer = Layer.mergeAll(
    NatsBusLive({ servers: natsUrl, name: "t1-load", connectAttempts: 3 }),
    Layer.succeed(Metrics, metrics),
  )
  const context: Context.Context<Bus | Metrics> = await Effect.runPromise(
    Layer.buildWithScope(layer, scope),
  )
  const provide = <A, E>(effect: Effect.Effect<A, E, Bus | Metrics>) =>
    effect.pipe(
      Effect.provideContext(context),
      // The sampler logs every episode at info; the load test prints its own summary.
      Effect.provideService(References.MinimumLogLevel, "Warn"),
    )
  return {
    subjects: subjectsFor(prefix),
    turnExecSeconds,
    run: (effect) => Effect.runPromise(provide(effect)),
    fork: (effect) => Effect.runFork(provide(effect)),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void)),
  }
}
