/**
 * Several replicas of one inference engine (the same model behind several URLs) as one policy
 * backend. An episode stays on its replica (its prefix cache and, with incremental routing, the
 * positions already reported live there); new episodes go round-robin. Each replica has a
 * circuit breaker: consecutive infra failures (transport errors, timeouts, 408/429/5xx — the
 * retryable PolicyErrors) open it, and while it is open no turn is sent there; the episode's
 * retry of the failed turn goes to another replica. After the cool-down one turn probes it.
 * A turn that finds no replica in rotation because the engine bridge has them out (loading new
 * weights, as an SGLang server holds requests during its own load) waits for one to rejoin,
 * up to `rotationWaitMs`, instead of failing its episode.
 */
import { Clock, Duration, Effect } from "effect"
import {
  type BreakerMetrics,
  type BreakerOptions,
  CircuitBreaker,
  DEFAULT_BREAKER_OPTIONS,
} from "../../../services/breaker/index.ts"
import { type GenerateRequest, type PolicyBackendShape, PolicyError } from "./backend.ts"

export interface Replica {
  /** Names the replica in metrics and messages (its URL). */
  readonly name: string
  readonly backend: PolicyBackendShape
}

export interface ReplicaOptions {
  readonly breaker?: BreakerOptions
  readonly metrics?: BreakerMetrics
  /**
   * Whether a replica takes turns now (the engine bridge takes one out while it loads new weights,
   * and keeps it out after a failed load); every replica does when unset.
   */
  readonly inRotation?: (name: string) => boolean
  /**
   * How long a turn waits for a replica to rejoin the rotation when none takes turns because
   * the bridge has them out; then it fails (retryable). Default 10 minutes (loads of real
   * checkpoints take tens of seconds, and failed ones are retried with back-off).
   */
  readonly rotationWaitMs?: number
  /**
   * Told when a turn is sent to a replica and when it ends, however it ends (the engine bridge
   * waits for a replica to drain before a load that must not run under a turn).
   */
  readonly turns?: {
    readonly started: (name: string) => void
    readonly ended: (name: string) => void
  }
}

/** The `component` label of an engine replica's breaker in t1_breaker_state. */
export const ENGINE_BREAKER_COMPONENT = "engine"

export const replicatedBackend = (
  replicas: ReadonlyArray<Replica>,
  options: ReplicaOptions = {},
): PolicyBackendShape => {
  const first = replicas[0]
  if (first === undefined) throw new RangeError("replicatedBackend: no replicas")
  if (
    replicas.length === 1 &&
    options.breaker === undefined &&
    options.inRotation === undefined &&
    options.rotationWaitMs === undefined &&
    options.turns === undefined
  )
    return first.backend
  const inRotation = options.inRotation ?? (() => true)
  const rotationWaitMs = options.rotationWaitMs ?? 600_000
  const someOut = () => members.some((x) => !inRotation(x.name))
  const members = replicas.map((r) => ({
    ...r,
    breaker: new CircuitBreaker(options.breaker ?? DEFAULT_BREAKER_OPTIONS),
  }))
  for (const m of members) options.metrics?.set(ENGINE_BREAKER_COMPONENT, m.name, "closed")
  type Member = (typeof members)[number]
  const bySession = new Map<string, Member>()
  let next = 0

  /** The session's replica when it takes work, else the next one round-robin that does. */
  const pick = (sessionId: string, now: number): Member | undefined => {
    const sticky = bySession.get(sessionId)
    if (sticky !== undefined && inRotation(sticky.name) && sticky.breaker.tryAcquire(now))
      return sticky
    for (let i = 0; i < members.length; i++) {
      const m = members[(next + i) % members.length] as Member
      if (m === sticky || !inRotation(m.name) || !m.breaker.tryAcquire(now)) continue
      next = (next + i + 1) % members.length
      bySession.set(sessionId, m)
      return m
    }
    return undefined
  }

  const generate = (request: GenerateRequest) =>
    Effect.gen(function* () {
      const start = yield* Clock.currentTimeMillis
      let now = start
      let m = pick(request.sessionId, now)
      // Replicas the bridge has out rejoin when their load is confirmed: wait for one.
      while (m === undefined && someOut() && now - start < rotationWaitMs) {
        yield* Effect.sleep(Duration.millis(Math.min(50, rotationWaitMs - (now - start))))
        now = yield* Clock.currentTimeMillis
        m = pick(request.sessionId, now)
      }
      if (m === undefined) {
        const reopen = Math.min(...members.map((x) => x.breaker.reopensAtMs() ?? now))
        return yield* new PolicyError({
          backend: first.backend.name,
          message: someOut()
            ? `${first.backend.name}: no engine replica in rotation after waiting ${now - start} ms (loading new weights, or their last load failed and is being retried)`
            : `${first.backend.name}: every engine replica is out of service (circuit breakers open after infra failures); the first probe is in ${Math.max(0, reopen - now)} ms`,
          retryable: true,
        })
      }
      const probing = m.breaker.state(now) === "half_open"
      if (probing) options.metrics?.set(ENGINE_BREAKER_COMPONENT, m.name, "half_open")
      options.turns?.started(m.name)
      return yield* m.backend.generate(request).pipe(
        Effect.ensuring(Effect.sync(() => options.turns?.ended(m.name))),
        Effect.tap(() =>
          Effect.sync(() => {
            if (m.breaker.success())
              options.metrics?.set(ENGINE_BREAKER_COMPONENT, m.name, "closed")
          }),
        ),
        Effect.tapError((e) =>
          Effect.gen(function* () {
            // An answer the engine gave (a 4xx, a bad shape) says the replica is up.
            if (!e.retryable) {
              if (m.breaker.success())
                options.metrics?.set(ENGINE_BREAKER_COMPONENT, m.name, "closed")
              return
            }
            // The retry of this turn goes elsewhere if another replica takes work.
            bySession.delete(request.sessionId)
            if (m.breaker.failure(yield* Clock.currentTimeMillis)) {
              options.metrics?.opened(ENGINE_BREAKER_COMPONENT, m.name)
              yield* Effect.logWarning(
                `${m.backend.name} replica ${m.name}: circuit breaker open ${probing ? "again (the probe failed)" : `after ${m.breaker.options.failures} infra failures in a row`}; no turns for ${m.breaker.options.cooldownMs} ms: ${e.message}`,
              )
            }
          }),
        ),
        Effect.onInterrupt(() => Effect.sync(() => m.breaker.release())),
      )
    })

  return {
    name: first.backend.name,
    contextLength: Math.min(...replicas.map((r) => r.backend.contextLength)),
    generate,
    // Every replica: a session that moved may have left state on the one it left.
    release: (sessionId) =>
      Effect.andThen(
        Effect.sync(() => bySession.delete(sessionId)),
        Effect.forEach(members, (m) => m.backend.release(sessionId), { discard: true }),
      ),
  }
}
