import { Deferred, Effect, Queue, type Scope } from "effect"
import {
  ContinuousBatcher,
  type Generated,
  Rng,
  Sequence,
  type TinyMoe,
} from "../../../model/index.ts"
import {
  type FinishReason,
  type GenerateRequest,
  type GenerateResult,
  type PolicyBackendShape,
  PolicyError,
  type RoutingRows,
} from "./backend.ts"

const NAME = "tinymoe"

interface Session {
  sequence: Sequence
  /** Positions whose routing was already returned: each position is reported once, when first processed. */
  reported: number
}

interface Pending {
  readonly batcher: ContinuousBatcher
  readonly deferred: Deferred.Deferred<Generated, PolicyError>
}

/** The embedded policy: a TinyMoE whose weights the learner can replace between turns. */
export interface EmbeddedPolicy extends PolicyBackendShape {
  /** New weights for turns that start from now on; turns in flight finish on the old ones. */
  setWeights(model: TinyMoe, version: bigint): void
  readonly version: bigint
  readonly model: TinyMoe
  /** Requests being generated right now. */
  readonly inFlight: number
}

const isPrefix = (prefix: ReadonlyArray<number>, ids: Uint32Array) => {
  if (prefix.length > ids.length) return false
  for (let i = 0; i < prefix.length; i++) if (prefix[i] !== ids[i]) return false
  return true
}

/**
 * Runs TinyMoE in-process with continuous batching across every episode of the process: each
 * `generate` joins the running batch at the next decode step. Between steps the loop yields to
 * the event loop, so sandbox and bus traffic keep flowing while the model works.
 */
export const embeddedPolicy = (
  initial: TinyMoe,
  initialVersion: bigint,
  options: { readonly contextLength?: number } = {},
): Effect.Effect<EmbeddedPolicy, never, Scope.Scope> =>
  Effect.gen(function* () {
    let model = initial
    let version = initialVersion
    let batcher = new ContinuousBatcher(model)
    const versions = new Map<ContinuousBatcher, bigint>([[batcher, version]])
    const sessions = new Map<string, Session>()
    const pending = new Set<Pending>()
    const wake = yield* Queue.unbounded<void>()
    const contextLength = Math.min(options.contextLength ?? 4096, initial.config.maxSeqLen)

    const stepAll = () => {
      for (const b of new Set([...pending].map((p) => p.batcher))) {
        try {
          b.step()
        } catch (error) {
          for (const p of pending) {
            if (p.batcher !== b) continue
            pending.delete(p)
            Deferred.doneUnsafe(
              p.deferred,
              Effect.fail(
                new PolicyError({
                  backend: NAME,
                  message: `generation failed: ${String(error)}`,
                  retryable: false,
                }),
              ),
            )
          }
          if (b === batcher) batcher = new ContinuousBatcher(model)
        }
      }
      for (const b of versions.keys()) if (b !== batcher && b.size === 0) versions.delete(b)
    }
    const nextTick = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.gen(function* () {
          if (pending.size === 0) {
            yield* Queue.take(wake)
            yield* Queue.clear(wake)
          }
          stepAll()
          yield* nextTick
        }),
      ),
    )

    const sessionFor = (request: GenerateRequest): Session => {
      let session = sessions.get(request.sessionId)
      if (
        !session ||
        session.sequence.model !== model ||
        !isPrefix(session.sequence.tokens, request.ids)
      ) {
        // New weights (or a rewritten context): the cache is rebuilt under the current weights.
        const sequence = new Sequence(model, model.newCache(contextLength))
        session = { sequence, reported: session?.reported ?? 0 }
        sessions.set(request.sessionId, session)
      }
      session.sequence.append(request.ids.subarray(session.sequence.tokens.length))
      return session
    }

    const finish = (
      session: Session,
      generated: Generated,
      turnVersion: bigint,
    ): GenerateResult => {
      const c = model.config
      const processed = session.sequence.processed
      const from = Math.min(session.reported, processed)
      const routing: RoutingRows = {
        start: from,
        rows: session.sequence.routing(from, processed),
        layers: c.nLayers,
        topK: c.topK,
        numExperts: c.nExperts,
      }
      session.reported = Math.max(session.reported, processed)
      return {
        tokens: Uint32Array.from(generated.tokens),
        logprobs: Float32Array.from(generated.logprobs),
        routing,
        finishReason: (generated.stopReason ?? "max_tokens") as FinishReason,
        policyVersion: turnVersion,
      }
    }

    const generate = (request: GenerateRequest): Effect.Effect<GenerateResult, PolicyError> =>
      Effect.gen(function* () {
        if (request.ids.length === 0)
          return yield* new PolicyError({
            backend: NAME,
            message: "empty context",
            retryable: false,
          })
        if (request.ids.length >= contextLength) {
          return yield* new PolicyError({
            backend: NAME,
            message: `context of ${request.ids.length} tokens leaves no room in ${contextLength}`,
            retryable: false,
          })
        }
        const bad = request.ids.find((id) => id >= model.config.vocabSize)
        if (bad !== undefined) {
          return yield* new PolicyError({
            backend: NAME,
            message: `token id ${bad} is outside the vocabulary of ${model.config.vocabSize}`,
            retryable: false,
          })
        }
        const session = sessionFor(request)
        const deferred = yield* Deferred.make<Generated, PolicyError>()
        const s = request.sampling
        const entry: Pending = { batcher, deferred }
        const turnVersion = versions.get(batcher) ?? version
        try {
          batcher.add(
            {
              sequence: session.sequence,
              params: {
                temperature: s.temperature,
                topP: s.topP,
                ...(s.topK !== undefined ? { topK: s.topK } : {}),
                maxTokens: s.maxTokens,
                stopTokenIds: new Set(s.stopTokenIds),
              },
              rng: new Rng(s.seed ?? Math.floor(Math.random() * 2 ** 32)),
            },
            (generated) => {
              pending.delete(entry)
              Deferred.doneUnsafe(deferred, Effect.succeed(generated))
            },
          )
        } catch (error) {
          return yield* new PolicyError({ backend: NAME, message: String(error), retryable: false })
        }
        pending.add(entry)
        Queue.offerUnsafe(wake, undefined)
        const awaited = Deferred.await(deferred)
        const generated = request.timeoutMs
          ? yield* Effect.timeoutOrElse(awaited, {
              duration: request.timeoutMs,
              orElse: () =>
                Effect.fail(
                  new PolicyError({
                    backend: NAME,
                    message: `no answer within ${request.timeoutMs} ms`,
                    retryable: true,
                  }),
                ),
            })
          : yield* awaited
        return finish(session, generated, turnVersion)
      })

    const policy: EmbeddedPolicy = {
      name: NAME,
      contextLength,
      generate,
      release: (sessionId) =>
        Effect.sync(() => {
          sessions.delete(sessionId)
        }),
      setWeights(next, nextVersion) {
        model = next
        version = nextVersion
        batcher = new ContinuousBatcher(next)
        versions.set(batcher, nextVersion)
      },
      get version() {
        return version
      },
      get model() {
        return model
      },
      get inFlight() {
        return pending.size
      },
    }
    return policy
  })
