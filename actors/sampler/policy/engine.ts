/**
 * One HTTP inference engine as a PolicyBackendShape. The turn is the same for every engine — the
 * preflight (context room, a full context), the routing already reported for the session, one
 * JSON POST, the answer read under its shape checks, the routed frontier recorded — and an
 * engine adapter only says how its request is written and its answer read (sglang.ts, vllm.ts).
 */
import { Effect } from "effect"
import type { GenerateRequest, GenerateResult, PolicyBackendShape, PolicyError } from "./backend.ts"
import { postJson } from "./http.ts"
import { checkLayout } from "./routing.ts"
import { type EngineOptions, engineUrl, parseAnswer, preflight, RoutedPositions } from "./turn.ts"

export interface EngineDialect {
  /** The backend's name in errors and metrics. */
  readonly name: string
  /** The generation endpoint, below the engine's base URL. */
  readonly path: string
  /**
   * The request for one turn: at most `maxNewTokens` new tokens; with routing, rows from
   * position `routingFrom` on (0: every position).
   */
  readonly body: (
    request: GenerateRequest,
    maxNewTokens: number,
    routingFrom: number,
  ) => Record<string, unknown>
  /**
   * The turn's result from the engine's answer; throws ShapeError (or PolicyError) when the
   * answer is not what was asked for. `fallbackVersion`: the policy version when the engine
   * reports none.
   */
  readonly read: (
    answer: unknown,
    request: GenerateRequest,
    routingFrom: number,
    fallbackVersion: bigint,
  ) => GenerateResult
  /**
   * Runs after a turn was read, still inside it (a replica that drains for weight loads has the
   * turn in flight until this ends): fails the turn when the engine no longer holds the weights
   * the result names.
   */
  readonly confirm?: (result: GenerateResult) => Effect.Effect<void, PolicyError>
}

export const engineBackend = (
  options: EngineOptions,
  dialect: EngineDialect,
): PolicyBackendShape => {
  if (options.routing !== undefined) checkLayout(options.routing)
  const url = engineUrl(options, dialect.path)
  const routed = new RoutedPositions()
  const { name } = dialect

  const generate = (request: GenerateRequest): Effect.Effect<GenerateResult, PolicyError> =>
    Effect.gen(function* () {
      const fallbackVersion = options.policyVersion?.() ?? 0n
      const plan = yield* preflight(name, options.contextLength, request, fallbackVersion)
      if (plan.kind === "full") return plan.result
      const routingFrom =
        options.routing !== undefined && options.incrementalRouting === true
          ? routed.from(request)
          : 0
      const answer = yield* postJson({
        backend: name,
        url,
        body: dialect.body(request, plan.maxNewTokens, routingFrom),
        headers: options.headers,
        timeoutMs: request.timeoutMs ?? options.timeoutMs ?? 600_000,
        fetch: options.fetch,
      })
      const result = yield* parseAnswer(name, url, () =>
        dialect.read(answer, request, routingFrom, fallbackVersion),
      )
      if (dialect.confirm !== undefined) yield* dialect.confirm(result)
      // Every position but the last generated token has been routed and reported.
      if (result.routing !== undefined)
        routed.record(request.sessionId, request.ids.length + result.tokens.length - 1)
      return result
    })

  return {
    name,
    contextLength: options.contextLength,
    generate,
    release: (sessionId) => Effect.sync(() => routed.forget(sessionId)),
  }
}
