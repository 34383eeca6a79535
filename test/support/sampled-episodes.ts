/**
 * Episodes the TypeScript sampler generates (the embedded policy: its KV cache, batcher and
 * kernels) from deterministic prompts, with their behaviour log-probs and the routing the
 * sampler chose for every position: the input of the cross-framework tests of the PyTorch
 * reference learner.
 */
import { Effect } from "effect"
import { embeddedPolicy } from "../../actors/sampler/index.ts"
import type { TinyMoe } from "../../model/index.ts"

export interface SampledEpisode {
  readonly prompt: number
  /** Prompt then generated ids. */
  readonly ids: number[]
  /** Behaviour log-prob of each generated token (index 0: the first generated). */
  readonly logprobs: number[]
  /** Routing rows for positions [0, ids.length − 1), flattened [rows, layers, top_k]. */
  readonly routing: number[]
}

export const sampleEpisodes = (
  sampler: TinyMoe,
  o: { readonly episodes: number; readonly promptTokens: number; readonly maxTokens: number },
): Promise<SampledEpisode[]> => {
  const c = sampler.config
  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const policy = yield* embeddedPolicy(sampler, 0n, { contextLength: 512 })
        return yield* Effect.forEach(
          Array.from({ length: o.episodes }, (_, i) => i),
          (i) =>
            Effect.gen(function* () {
              const prompt = Array.from(
                { length: o.promptTokens },
                (_, j) => (j * 31 + i * 7 + 3) % c.vocabSize,
              )
              const r = yield* policy.generate({
                sessionId: `s${i}`,
                ids: Uint32Array.from(prompt),
                sampling: {
                  temperature: 1,
                  topP: 1,
                  maxTokens: o.maxTokens,
                  stopTokenIds: [],
                  seed: i + 1,
                },
              })
              const ids = [...prompt, ...r.tokens]
              const routing = r.routing
              if (routing === undefined || routing.start !== 0)
                throw new Error("the embedded sampler reports routing from position 0")
              return {
                prompt: prompt.length,
                ids,
                logprobs: Array.from(r.logprobs),
                routing: Array.from(
                  routing.rows.subarray(0, (ids.length - 1) * c.nLayers * c.topK),
                ),
              }
            }),
          { concurrency: "unbounded" },
        )
      }),
    ),
  )
}
