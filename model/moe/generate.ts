import type { Rng } from "../rng.ts"
import { ContinuousBatcher } from "./batcher.ts"
import type { TinyMoe } from "./model.ts"
import type { Sequence } from "./sequence.ts"

export interface SamplingParams {
  /** 0 = greedy. */
  readonly temperature: number
  /** Nucleus mass in (0, 1]; 1 disables it. */
  readonly topP: number
  readonly topK?: number
  readonly maxTokens: number
  /** Generation ends after emitting one of these (it is kept as the last token). */
  readonly stopTokenIds: ReadonlySet<number>
}

export type StopReason = "stop_token" | "max_tokens" | "context_full"

export interface GenerateRequest {
  readonly sequence: Sequence
  readonly params: SamplingParams
  readonly rng: Rng
}

export interface Generated {
  /** Position of the first generated token in the sequence. */
  readonly start: number
  readonly tokens: number[]
  /**
   * The contract's behaviour log-probability: log-softmax(logits / temperature) at the token,
   * before top-p/top-k (temperature 0 counts as 1). The learner recomputes it at the same
   * temperature.
   */
  readonly logprobs: number[]
  /** log-probability under the distribution actually sampled from (temperature, top-p). */
  readonly sampledLogprobs: number[]
  stopReason: StopReason | undefined
}

/**
 * Generates for several sequences at once (see ContinuousBatcher): concurrent episodes share
 * each decode step's weight reads.
 */
export const generateBatch = (
  model: TinyMoe,
  requests: ReadonlyArray<GenerateRequest>,
): Generated[] => {
  const out: Array<Generated | undefined> = requests.map(() => undefined)
  const batcher = new ContinuousBatcher(model)
  requests.forEach((request, i) => {
    batcher.add(request, (g) => {
      out[i] = g
    })
  })
  while (batcher.size > 0) batcher.step()
  return out as Generated[]
}
