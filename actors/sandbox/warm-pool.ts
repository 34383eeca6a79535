import { Duration, Effect, Exit, Schedule, type Scope, Semaphore } from "effect"
import { profileSpan } from "./docker/profile.ts"
import type { SandboxDriverShape, SandboxInfo, SandboxSpec } from "./driver.ts"
import type { SandboxError } from "./errors.ts"
import { makeTokenBucket } from "./rate-limit.ts"

export interface WarmTemplate {
  readonly spec: SandboxSpec
  /** Started sandboxes kept ready for specs equal to this one (labels and TTL aside). */
  readonly size: number
}

export interface PoolOptions {
  readonly warm: ReadonlyArray<WarmTemplate>
  /** Sandboxes being created at once, across warm refills and cold requests. */
  readonly maxStarting: number
  readonly createPerSecond: number
  readonly createBurst: number
}

export interface Lease {
  readonly info: SandboxInfo
  /** Handed out from the warm pool (else created for this request). */
  readonly warm: boolean
  readonly durationMs: number
}

export interface PoolEvents {
  readonly onCreated?: (source: "warm" | "cold", ms: number) => void
  readonly onCreateFailed?: (error: SandboxError) => void
  /**
   * Runs on every new sandbox before it is ready (warm) or handed out (cold), so that whatever
   * serving it needs is up before a client can hold its id.
   */
  readonly prepare?: (info: SandboxInfo) => Effect.Effect<void>
  /**
   * Asked once a create holds a start slot, right before the engine is called: a failure answers
   * the create without calling the engine (a host whose breaker opened while the create waited
   * for its slot).
   */
  readonly admit?: () => Effect.Effect<void, SandboxError>
}

/**
 * What makes two specs interchangeable for the warm pool: everything the container is created
 * with. Labels and TTL are bookkeeping and may differ.
 */
export const templateKey = (spec: SandboxSpec): string =>
  JSON.stringify([
    spec.image,
    spec.cpus,
    spec.memoryMb,
    spec.pidsLimit,
    spec.network,
    spec.user,
    spec.workdir,
    Object.entries(spec.env).sort(([a], [b]) => a.localeCompare(b)),
  ])

export interface SandboxPool {
  readonly acquire: (spec: SandboxSpec) => Effect.Effect<Lease, SandboxError>
  /** Ready sandboxes per template key. */
  readonly warmCounts: () => ReadonlyMap<string, number>
  readonly startingCount: () => number
  /** Ids of the ready (not yet leased) sandboxes: a reaper must leave them alone. */
  readonly warmIds: () => ReadonlySet<string>
}

/**
 * Warm pools per template, refilled in the background; cold creations share a global cap on
 * sandboxes in the starting state and a token-bucket creation rate. Closing the scope destroys
 * the ready sandboxes (leased ones belong to whoever leased them).
 */
export const makeSandboxPool = (
  driver: SandboxDriverShape,
  options: PoolOptions,
  events: PoolEvents = {},
): Effect.Effect<SandboxPool, never, Scope.Scope> =>
  Effect.gen(function* () {
    const bucket = yield* makeTokenBucket(options.createPerSecond, options.createBurst)
    const starting = yield* Semaphore.make(Math.max(1, options.maxStarting))
    let startingNow = 0
    const ready = new Map<string, SandboxInfo[]>()
    const filling = new Map<string, number>()
    let wake: (() => void) | undefined

    const prepare = events.prepare ?? (() => Effect.void)
    const admit = events.admit ?? (() => Effect.void)
    const create = (spec: SandboxSpec) =>
      Effect.andThen(
        Effect.sync(() => performance.now()),
        (asked) =>
          Effect.andThen(
            bucket.take,
            starting.withPermits(1)(
              Effect.andThen(
                Effect.suspend(admit),
                Effect.acquireUseRelease(
                  Effect.sync(() => {
                    startingNow++
                    profileSpan("pool: wait for a start slot", asked)
                    return performance.now()
                  }),
                  (began) =>
                    Effect.tap(driver.create(spec), (info) =>
                      Effect.andThen(
                        Effect.sync(() => profileSpan("driver: create", began, info.id)),
                        prepare(info),
                      ),
                    ),
                  () =>
                    Effect.sync(() => {
                      startingNow--
                    }),
                ),
              ),
            ),
          ),
      )

    const refillOnce = Effect.forEach(
      options.warm,
      (template) =>
        Effect.gen(function* () {
          const key = templateKey(template.spec)
          const have = (ready.get(key)?.length ?? 0) + (filling.get(key) ?? 0)
          const missing = template.size - have
          if (missing <= 0) return
          filling.set(key, (filling.get(key) ?? 0) + missing)
          yield* Effect.forEach(
            Array.from({ length: missing }),
            () =>
              Effect.gen(function* () {
                const [took, exit] = yield* Effect.timed(Effect.exit(create(template.spec)))
                filling.set(key, (filling.get(key) ?? 1) - 1)
                if (Exit.isSuccess(exit)) {
                  ready.set(key, [...(ready.get(key) ?? []), exit.value])
                  events.onCreated?.("warm", Math.round(Duration.toMillis(took)))
                } else {
                  const failure = exit.cause
                  yield* Effect.logWarning("warm pool: create failed", failure)
                }
              }),
            { concurrency: "unbounded", discard: true },
          )
        }),
      { concurrency: "unbounded", discard: true },
    )

    const waitForWake = Effect.callback<void>((resume) => {
      const timer = setTimeout(() => resume(Effect.void), 5000)
      wake = () => {
        clearTimeout(timer)
        resume(Effect.void)
      }
      return Effect.sync(() => clearTimeout(timer))
    })

    if (options.warm.length > 0) {
      yield* Effect.forkScoped(
        Effect.repeat(Effect.andThen(refillOnce, waitForWake), Schedule.forever),
      )
    }

    yield* Effect.addFinalizer(() =>
      Effect.forEach([...ready.values()].flat(), (info) => Effect.ignore(driver.destroy(info.id)), {
        concurrency: 8,
        discard: true,
      }),
    )

    return {
      acquire: (spec) =>
        Effect.suspend((): Effect.Effect<Lease, SandboxError> => {
          const key = templateKey(spec)
          const warm = ready.get(key)?.shift()
          if (warm !== undefined) {
            wake?.()
            // Taken from the pool: no time spent creating.
            return Effect.succeed({ info: warm, warm: true, durationMs: 0 })
          }
          return Effect.timed(create(spec)).pipe(
            Effect.tapError((e) => Effect.sync(() => events.onCreateFailed?.(e))),
            Effect.map(([took, info]) => {
              const durationMs = Math.round(Duration.toMillis(took))
              events.onCreated?.("cold", durationMs)
              return { info, warm: false, durationMs }
            }),
          )
        }),
      warmCounts: () => new Map([...ready.entries()].map(([k, v]) => [k, v.length])),
      startingCount: () => startingNow,
      warmIds: () => new Set([...ready.values()].flat().map((i) => i.id)),
    }
  })
