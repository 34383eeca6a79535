/**
 * The embedded TinyMoE per job: a sampler serves many jobs at once, and each samples with its
 * own weights — a train job's latest published version (followed as the learner announces new
 * ones), an eval job's policy_ref. Policies are built on the first episode that needs them and
 * dropped once no episode has used them for a while.
 */
import { Clock, Deferred, Effect, Exit, Schedule, Scope } from "effect"
import type { Kernels } from "../../../model/index.ts"
import type { EpisodeWorkItem } from "../../../proto/index.ts"
import type { BusShape, Subjects } from "../../../services/bus/index.ts"
import {
  followWeights,
  NOTHING_PUBLISHED,
  resolvePolicyRef,
} from "../../../services/weights/index.ts"
import { type PolicyBackendShape, PolicyError } from "./backend.ts"
import { type EmbeddedPolicy, embeddedPolicy } from "./embedded.ts"

export interface JobPoliciesOptions {
  readonly bus: BusShape
  readonly subjects: Subjects
  readonly vocabSize: number
  readonly contextLength: number
  readonly kernels?: Kernels
  /** A policy no episode has used for this long is dropped (default 10 min). */
  readonly idleMs?: number
}

export interface JobPolicies {
  /** The policy the episode of `item` samples with. */
  readonly forItem: (item: EpisodeWorkItem) => Effect.Effect<PolicyBackendShape, PolicyError>
  /** Policies held now. */
  readonly size: () => number
}

interface Entry {
  readonly ready: Deferred.Deferred<EmbeddedPolicy, PolicyError>
  readonly scope: Scope.Closeable
  readonly sessions: Set<string>
  lastUsedMs: number
}

/** Which weights an item samples with: its policy_ref, else its job's published weights. */
export const policyKey = (item: EpisodeWorkItem): string =>
  item.policyRef === "" ? `job:${item.jobId}` : item.policyRef

export const jobPolicies = (
  o: JobPoliciesOptions,
): Effect.Effect<JobPolicies, never, Scope.Scope> =>
  Effect.gen(function* () {
    const entries = new Map<string, Entry>()
    const idleMs = o.idleMs ?? 10 * 60_000

    const build = (key: string, entry: Entry) =>
      Effect.gen(function* () {
        // job:<id> starts from the job's latest published weights: a train job is admitted only
        // after its learner announced v0, which may be anything its policy_ref named (the
        // follower below skips announcements at or below the version it starts from). With
        // nothing published (an eval job without policy_ref) it samples the initial weights.
        const job = key.startsWith("job:") ? key.slice(4) : undefined
        const start = yield* resolvePolicyRef(o.bus, o.subjects, key, o.vocabSize, o.kernels).pipe(
          Effect.catchTag("WeightsUnavailable", (e) =>
            job !== undefined && e.reason === NOTHING_PUBLISHED
              ? resolvePolicyRef(o.bus, o.subjects, "tinymoe:init", o.vocabSize, o.kernels)
              : Effect.fail(e),
          ),
        )
        const policy = yield* embeddedPolicy(start.model, start.version, {
          contextLength: o.contextLength,
        }).pipe(Scope.provide(entry.scope))
        if (job !== undefined)
          yield* followWeights(o.bus, o.subjects, job, policy, o.kernels).pipe(
            Scope.provide(entry.scope),
          )
        return policy
      }).pipe(
        Effect.mapError(
          (e) =>
            new PolicyError({
              backend: "tinymoe",
              message: `policy ${key}: ${e instanceof Error ? e.message : String(e)}`,
              retryable: false,
            }),
        ),
      )

    const tracked = (entry: Entry, policy: EmbeddedPolicy): PolicyBackendShape => ({
      name: policy.name,
      contextLength: policy.contextLength,
      generate: (request) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          entry.sessions.add(request.sessionId)
          entry.lastUsedMs = now
          return policy.generate(request)
        }),
      release: (sessionId) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          entry.sessions.delete(sessionId)
          entry.lastUsedMs = now
          return policy.release(sessionId)
        }),
    })

    const drop = (key: string, entry: Entry) =>
      Effect.suspend(() => {
        entries.delete(key)
        return Scope.close(entry.scope, Exit.void)
      })

    const forItem = (item: EpisodeWorkItem): Effect.Effect<PolicyBackendShape, PolicyError> =>
      Effect.gen(function* () {
        const key = policyKey(item)
        let entry = entries.get(key)
        if (entry === undefined) {
          const fresh: Entry = {
            ready: yield* Deferred.make<EmbeddedPolicy, PolicyError>(),
            scope: yield* Scope.make(),
            sessions: new Set(),
            lastUsedMs: yield* Clock.currentTimeMillis,
          }
          entries.set(key, fresh)
          entry = fresh
          const built = yield* Effect.exit(build(key, fresh)).pipe(
            Effect.onInterrupt(() =>
              Deferred.fail(
                fresh.ready,
                new PolicyError({
                  backend: "tinymoe",
                  message: `policy ${key}: loading was interrupted`,
                  retryable: true,
                }),
              ).pipe(Effect.andThen(drop(key, fresh))),
            ),
          )
          yield* Deferred.done(fresh.ready, built)
          // A policy that could not be built is not kept: the next episode tries again.
          if (Exit.isFailure(built)) yield* drop(key, fresh)
        }
        entry.lastUsedMs = yield* Clock.currentTimeMillis
        return tracked(entry, yield* Deferred.await(entry.ready))
      })

    const sweep = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      for (const [key, entry] of [...entries]) {
        if (entry.sessions.size > 0 || now - entry.lastUsedMs < idleMs) continue
        yield* drop(key, entry)
        yield* Effect.logInfo(`sampler: policy ${key} idle for ${idleMs} ms; dropped`)
      }
    })
    yield* sweep.pipe(
      Effect.repeat(Schedule.spaced(`${Math.max(1000, Math.floor(idleMs / 4))} millis`)),
      Effect.forkScoped,
    )
    yield* Effect.addFinalizer(() =>
      Effect.forEach([...entries], ([key, entry]) => drop(key, entry), { discard: true }),
    )
    return { forItem, size: () => entries.size }
  })
