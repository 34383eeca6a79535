import type { Floats } from "../kernels/kernels.ts"
import { rowLogprob } from "../logprob.ts"
import { sampleToken } from "../sample/index.ts"
import type { Row } from "./forward.ts"
import type { Generated, GenerateRequest } from "./generate.ts"
import type { TinyMoe } from "./model.ts"

interface Active {
  readonly request: GenerateRequest
  readonly generated: Generated
  readonly done: (generated: Generated) => void
  logits: Floats | undefined
}

const temperatureLogprob = (
  logits: Floats,
  id: number,
  temperature: number,
  plain: number,
): number => {
  if (temperature === 0 || temperature === 1) return plain
  return rowLogprob(logits, 0, logits.length, id, 1 / temperature)
}

/**
 * Continuous batching: requests join between decode steps and leave as soon as they stop, and
 * every step pushes one row per unfinished request through the model together. A row's result
 * does not depend on its batch, so batching changes throughput, never tokens.
 */
export class ContinuousBatcher {
  private joining: Active[] = []
  private active: Active[] = []

  constructor(readonly model: TinyMoe) {}

  get size(): number {
    return this.joining.length + this.active.length
  }

  add(request: GenerateRequest, done: (generated: Generated) => void): void {
    if (request.sequence.model !== this.model) throw new Error("sequence belongs to another model")
    if (request.sequence.tokens.length === 0)
      throw new RangeError("cannot generate from an empty sequence")
    this.joining.push({
      request,
      done,
      logits: undefined,
      generated: {
        start: request.sequence.tokens.length,
        tokens: [],
        logprobs: [],
        sampledLogprobs: [],
        stopReason: undefined,
      },
    })
  }

  /** Prefills joiners, samples one token for every request, decodes the continuing ones. */
  step(): void {
    for (const joiner of this.joining) {
      joiner.request.sequence.flush()
      joiner.logits = joiner.request.sequence.lastLogits
      this.active.push(joiner)
    }
    this.joining = []
    const continuing: Active[] = []
    for (const a of this.active) {
      const { params, sequence, rng } = a.request
      const g = a.generated
      if (g.tokens.length >= params.maxTokens) g.stopReason = "max_tokens"
      else if (sequence.tokens.length >= sequence.cache.capacity) g.stopReason = "context_full"
      else {
        const logits = a.logits as Floats
        const choice = sampleToken(logits, params, rng)
        sequence.append([choice.id])
        g.tokens.push(choice.id)
        g.logprobs.push(temperatureLogprob(logits, choice.id, params.temperature, choice.logprob))
        g.sampledLogprobs.push(choice.sampledLogprob)
        if (params.stopTokenIds.has(choice.id)) g.stopReason = "stop_token"
        else if (g.tokens.length >= params.maxTokens) g.stopReason = "max_tokens"
        else if (sequence.tokens.length >= sequence.cache.capacity) g.stopReason = "context_full"
      }
      if (g.stopReason) a.done(g)
      else continuing.push(a)
    }
    this.active = continuing
    if (continuing.length === 0) return
    const rows: Row[] = continuing.map(({ request: { sequence } }) => ({
      cache: sequence.cache,
      token: sequence.tokens[sequence.tokens.length - 1] as number,
    }))
    const result = this.model.forward(rows)
    const V = this.model.config.vocabSize
    const width = this.model.config.nLayers * this.model.config.topK
    continuing.forEach((a, r) => {
      const row = result.logits.subarray(r * V, (r + 1) * V)
      a.request.sequence.record(result.routing.subarray(r * width, (r + 1) * width))
      a.request.sequence.lastLogits = row
      a.logits = row
    })
  }
}
