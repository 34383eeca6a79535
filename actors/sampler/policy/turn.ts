/** What the engine adapters share around one HTTP exchange: checks before it, bookkeeping after. */
import { Effect } from "effect"
import {
  type FinishReason,
  type GenerateRequest,
  type GenerateResult,
  PolicyError,
} from "./backend.ts"
import { ShapeError } from "./fields.ts"
import type { Fetch } from "./http.ts"
import type { RoutingLayout } from "./routing.ts"

/** How many new tokens a request may ask for, or why it is not sent at all. */
export type Preflight =
  | { readonly kind: "send"; readonly maxNewTokens: number }
  | { readonly kind: "full"; readonly result: GenerateResult }

/**
 * Rejects what no engine could serve before anything goes on the wire, and caps the turn's
 * maxTokens to the room left in the context (vLLM rejects prompt + max_tokens > max_model_len).
 * A context that is exactly full yields an empty `context_full` turn, so the episode ends as
 * truncated rather than failed.
 */
export const preflight = (
  backend: string,
  contextLength: number,
  request: GenerateRequest,
  policyVersion: bigint,
): Effect.Effect<Preflight, PolicyError> => {
  const fail = (message: string) =>
    Effect.fail(new PolicyError({ backend, message: `${backend}: ${message}`, retryable: false }))
  const promptLength = request.ids.length
  if (promptLength === 0) return fail("the context is empty")
  if (promptLength > contextLength)
    return fail(
      `the context has ${promptLength} tokens, more than the ${contextLength} the engine accepts`,
    )
  const { maxTokens } = request.sampling
  if (!Number.isSafeInteger(maxTokens) || maxTokens < 1)
    return fail(`sampling.maxTokens must be a positive integer, got ${maxTokens}`)
  if (promptLength === contextLength)
    return Effect.succeed({
      kind: "full",
      result: {
        tokens: new Uint32Array(0),
        logprobs: new Float32Array(0),
        finishReason: "context_full",
        policyVersion,
      },
    })
  return Effect.succeed({
    kind: "send",
    maxNewTokens: Math.min(maxTokens, contextLength - promptLength),
  })
}

/** A length stop that filled the context is `context_full`, whatever cap the engine applied. */
export const lengthFinish = (
  promptLength: number,
  generated: number,
  contextLength: number,
): FinishReason => (promptLength + generated >= contextLength ? "context_full" : "max_tokens")

/** Runs a parser over an answer; a ShapeError becomes a non-retryable PolicyError naming the field. */
export const parseAnswer = <A>(
  backend: string,
  url: string,
  parse: () => A,
): Effect.Effect<A, PolicyError> =>
  Effect.try({
    try: parse,
    catch: (error) =>
      error instanceof PolicyError
        ? error
        : new PolicyError({
            backend,
            message: `${backend}: malformed answer from ${url}: ${
              error instanceof ShapeError || error instanceof Error ? error.message : String(error)
            }`,
            retryable: false,
          }),
  })

/**
 * Positions whose routing each session has already received, so a later turn can ask the engine
 * for the new positions only (requests of one session extend each other's ids).
 */
export class RoutedPositions {
  private readonly reported = new Map<string, number>()

  /** First position to ask routing for: what was reported, never past this prompt. */
  from(request: GenerateRequest): number {
    return Math.min(this.reported.get(request.sessionId) ?? 0, request.ids.length)
  }

  record(sessionId: string, endPosition: number): void {
    this.reported.set(sessionId, endPosition)
  }

  forget(sessionId: string): void {
    this.reported.delete(sessionId)
  }
}

/** Connection and routing options shared by the engine adapters (SGLang, vLLM). */
export interface EngineOptions {
  /** Server root, e.g. `http://10.0.0.5:30000`; the adapter adds its endpoint path. */
  readonly baseUrl: string
  /** The server's context length (prompt + generation): SGLang `context_length`, vLLM `max_model_len`. */
  readonly contextLength: number
  /**
   * Version of the weights the server holds, used when the answer reports none (vLLM never does,
   * SGLang's `weight_version` is "default" unless set). 0 when unset.
   */
  readonly policyVersion?: () => bigint
  readonly headers?: Readonly<Record<string, string>>
  readonly fetch?: Fetch
  /**
   * The model's MoE shape. When set, every request asks for routed experts (the server must run
   * with `--enable-return-routed-experts`) and an answer without them fails the turn; when unset,
   * routing is neither requested nor reported.
   */
  readonly routing?: RoutingLayout
  /**
   * Ask only for routing of positions this session has not been told yet (SGLang
   * `routed_experts_start_len`, vLLM `routed_experts_prompt_start`); the rows then start there.
   * Off by default: every turn carries the routing of the whole context.
   */
  readonly incrementalRouting?: boolean
  /** Time limit of a request without its own `timeoutMs`. Default 10 minutes. */
  readonly timeoutMs?: number
}

/** The endpoint URL under an engine's root. */
export const engineUrl = (options: EngineOptions, path: string): string =>
  `${options.baseUrl.replace(/\/+$/, "")}${path}`
