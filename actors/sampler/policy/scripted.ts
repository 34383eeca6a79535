import { Effect } from "effect"
import type { Tokenizer } from "../../../model/index.ts"
import { type GenerateResult, type PolicyBackendShape, PolicyError } from "./backend.ts"

/**
 * A policy that answers with prepared text instead of a model: turn i of a session is
 * `turns(sessionId)[i]` (the last one repeats), encoded with the tokenizer and closed with the
 * end-of-turn token. The oracle agent (a task's reference solution as actions) and load tests
 * run through the same episode loop, TITO builder and stream as a model would. Log-probs are 0
 * (the text has probability one under this policy) and no routing is recorded.
 */
export const scriptedPolicy = (
  tokenizer: Tokenizer,
  turns: (sessionId: string) => ReadonlyArray<string>,
  options: { readonly contextLength?: number; readonly version?: bigint } = {},
): PolicyBackendShape & { readonly calls: (sessionId: string) => number } => {
  const progress = new Map<string, number>()
  const endOfTurn = tokenizer.specialId("<|end|>")
  return {
    name: "scripted",
    contextLength: options.contextLength ?? 1 << 30,
    calls: (sessionId) => progress.get(sessionId) ?? 0,
    generate: (request) =>
      Effect.gen(function* () {
        const script = turns(request.sessionId)
        if (script.length === 0)
          return yield* new PolicyError({
            backend: "scripted",
            message: "no turns scripted",
            retryable: false,
          })
        const i = progress.get(request.sessionId) ?? 0
        progress.set(request.sessionId, i + 1)
        const text = script[Math.min(i, script.length - 1)] as string
        const body = tokenizer.encode(text, { allowSpecial: true })
        const capped = body.length + 1 > request.sampling.maxTokens
        const tokens = capped
          ? body.slice(0, request.sampling.maxTokens)
          : Uint32Array.from([...body, endOfTurn])
        const result: GenerateResult = {
          tokens,
          logprobs: new Float32Array(tokens.length),
          finishReason: capped ? "max_tokens" : "stop_token",
          policyVersion: options.version ?? 0n,
        }
        return result
      }),
    release: (sessionId) =>
      Effect.sync(() => {
        progress.delete(sessionId)
      }),
  }
}
