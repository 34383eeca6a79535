import type { Floats } from "../kernels/kernels.ts"
import type { Rng } from "../rng.ts"
import { sampleToken } from "../sample/index.ts"
import type { Row } from "./forward.ts"
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

const temperatureLogprob = (
  logits: Floats,
  id: number,
  temperature: number,
  plain: number,
): number => {
  if (temperature === 0 || temperature === 1) return plain
  let max = Number.NEGATIVE_INFINITY
  for (let j = 0; j < logits.length; j++) max = Math.max(max, (logits[j] as number) / temperature)
  let sum = 0
  for (let j = 0; j < logits.length; j++) sum += Math.exp((logits[j] as number) / temperature - max)
  return (logits[id] as number) / temperature - max - Math.log(sum)
}

/**
 * Generates for several sequences at once: every decode step pushes one row per unfinished
 * sequence through the model together, so concurrent episodes share each weight read. A row's
 * result does not depend on its batch, so batching changes speed, not tokens.
 */
export const generateBatch = (
  model: TinyMoe,
  requests: ReadonlyArray<GenerateRequest>,
): Generated[] => {
  const out: Generated[] = requests.map((r) => ({
    start: r.sequence.tokens.length,
    tokens: [],
    logprobs: [],
    sampledLogprobs: [],
    stopReason: undefined,
  }))
  for (const request of requests) {
    if (request.sequence.model !== model) throw new Error("sequence belongs to another model")
    request.sequence.flush()
    if (!request.sequence.lastLogits) throw new RangeError("cannot generate from an empty sequence")
  }
  const logits: Array<Floats | undefined> = requests.map((r) => r.sequence.lastLogits)
  let active = requests.map((_, i) => i)
  while (active.length > 0) {
    const continuing: number[] = []
    for (const i of active) {
      const request = requests[i] as GenerateRequest
      const generated = out[i] as Generated
      const { params, sequence } = request
      if (generated.tokens.length >= params.maxTokens) {
        generated.stopReason = "max_tokens"
        continue
      }
      if (sequence.tokens.length >= sequence.cache.capacity) {
        generated.stopReason = "context_full"
        continue
      }
      const choice = sampleToken(logits[i] as Floats, params, request.rng)
      sequence.append([choice.id])
      generated.tokens.push(choice.id)
      generated.logprobs.push(
        temperatureLogprob(logits[i] as Floats, choice.id, params.temperature, choice.logprob),
      )
      generated.sampledLogprobs.push(choice.sampledLogprob)
      if (params.stopTokenIds.has(choice.id)) generated.stopReason = "stop_token"
      else if (generated.tokens.length >= params.maxTokens) generated.stopReason = "max_tokens"
      else if (sequence.tokens.length >= sequence.cache.capacity)
        generated.stopReason = "context_full"
      else continuing.push(i)
    }
    if (continuing.length === 0) break
    const rows: Row[] = continuing.map((i) => {
      const sequence = (requests[i] as GenerateRequest).sequence
      return { cache: sequence.cache, token: sequence.tokens[sequence.tokens.length - 1] as number }
    })
    const result = model.forward(rows)
    const V = model.config.vocabSize
    const width = model.config.nLayers * model.config.topK
    continuing.forEach((i, r) => {
      const sequence = (requests[i] as GenerateRequest).sequence
      sequence.record(result.routing.subarray(r * width, (r + 1) * width))
      const row = result.logits.subarray(r * V, (r + 1) * V)
      sequence.lastLogits = row
      logits[i] = row
    })
    active = continuing
  }
  return out
}
