import { Context, Data, type Effect } from "effect"

/** How to sample one turn. */
export interface TurnSampling {
  /** ≥ 0; 0 = greedy. */
  readonly temperature: number
  /** (0, 1]. */
  readonly topP: number
  /** Unset or ≥ 1. */
  readonly topK?: number
  /** Most tokens this turn may generate. */
  readonly maxTokens: number
  /** Generation ends after one of these ids; it is part of the output. */
  readonly stopTokenIds: ReadonlyArray<number>
  /** Makes sampling reproducible where the backend supports it. */
  readonly seed?: number
}

export interface GenerateRequest {
  /**
   * Identifies the conversation, so a backend can keep its KV cache between turns. The ids of
   * the next request of the same session always extend the ids of the previous one (prompt,
   * previous outputs, appended observation tokens), never rewrite them.
   */
  readonly sessionId: string
  /** The whole context so far, token ids exactly as the trajectory holds them (TITO). */
  readonly ids: Uint32Array
  readonly sampling: TurnSampling
  /** Gives up after this long (wall clock); the backend fails with a retryable PolicyError. */
  readonly timeoutMs?: number
}

/** Expert choices for a run of positions: rows [positions, layers, top_k] starting at `start`. */
export interface RoutingRows {
  readonly start: number
  readonly rows: Uint8Array | Uint16Array
  readonly layers: number
  readonly topK: number
  readonly numExperts: number
}

export type FinishReason = "stop_token" | "max_tokens" | "context_full"

export interface GenerateResult {
  readonly tokens: Uint32Array
  /** Behaviour log-prob of each generated token (after temperature, before top-p/top-k). */
  readonly logprobs: Float32Array
  /**
   * Routing of every position the backend pushed through the model for this request (prompt
   * and generated, but not the last generated token), or undefined when it does not record
   * routing. Rows for positions already reported may be repeated; later reports win.
   */
  readonly routing?: RoutingRows
  readonly finishReason: FinishReason
  /** Weights that generated this turn. */
  readonly policyVersion: bigint
}

export class PolicyError extends Data.TaggedError("PolicyError")<{
  readonly backend: string
  readonly message: string
  /** Transient (timeout, engine restarting, overload): the episode may retry the turn. */
  readonly retryable: boolean
  /** The HTTP status the engine answered, when it answered one. */
  readonly status?: number
}> {}

/** Something that turns a context into the policy's next turn: the embedded TinyMoE or an engine. */
export interface PolicyBackendShape {
  readonly name: string
  /** Largest context (prompt + generation) the backend accepts. */
  readonly contextLength: number
  generate(request: GenerateRequest): Effect.Effect<GenerateResult, PolicyError>
  /** Forgets a session's cached state (the episode ended). */
  release(sessionId: string): Effect.Effect<void>
}

/**
 * The policy one episode samples with, as a service: `runEpisode` reads it from its context. The
 * sampler provides it per episode (the embedded TinyMoE of the item's job, or the engine
 * replicas); `policyLayer` in hosted.ts builds it from the actor's flags.
 */
export class PolicyBackend extends Context.Service<PolicyBackend, PolicyBackendShape>()(
  "t1/PolicyBackend",
) {}
