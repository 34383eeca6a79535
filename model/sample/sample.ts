import { logprobOf, rowNormaliser } from "../logprob.ts"
import { SamplingError } from "./errors.ts"

export type Logits = Float32Array | Float64Array

export interface SamplingParams {
  /** ≥ 0; 0 picks the argmax (lowest index on ties), 1 leaves the logits as they are. */
  readonly temperature: number
  /** In (0, 1]: sample from the smallest set of most probable tokens holding this much mass. */
  readonly topP: number
  /** When set, a positive integer: keep only the k most probable tokens (before top-p). */
  readonly topK?: number
}

/** Anything with a uniform `next()` in [0, 1), such as `Rng` from model/rng.ts. */
export interface RandomSource {
  next(): number
}

export interface SampledToken {
  readonly id: number
  /**
   * log π(id): the token's log-probability under the policy itself, the log-softmax of the raw
   * logits at temperature 1 with no top-k/top-p. This is what the trainer's importance ratios
   * and KL terms need, and what a forward pass over the same tokens recomputes.
   */
  readonly logprob: number
  /**
   * The log-probability of `id` under the distribution actually sampled from: softmax(logits / T)
   * restricted to the top-k/top-p set and renormalised. 0 for greedy decoding (a point mass).
   * For diagnostics and for correcting the mismatch between behaviour and policy distributions.
   */
  readonly sampledLogprob: number
}

function fail(field: string, reason: string): never {
  throw new SamplingError({ field, reason })
}

function checkParams(params: SamplingParams): void {
  const { temperature, topP, topK } = params
  if (!(temperature >= 0 && Number.isFinite(temperature))) {
    fail("temperature", `must be a finite number ≥ 0, got ${temperature}`)
  }
  if (!(topP > 0 && topP <= 1)) fail("topP", `must be in (0, 1], got ${topP}`)
  if (topK !== undefined && !(Number.isSafeInteger(topK) && topK >= 1)) {
    fail("topK", `must be a positive integer, got ${topK}`)
  }
}

/** Index of the largest logit (lowest index on ties); checks the logits on the way. */
function checkedArgmax(logits: Logits): number {
  if (logits.length === 0) fail("logits", "is empty")
  let best = -1
  let bestValue = Number.NEGATIVE_INFINITY
  for (let i = 0; i < logits.length; i++) {
    const x = logits[i] as number
    if (Number.isNaN(x)) fail(`logits[${i}]`, "is NaN")
    if (x === Number.POSITIVE_INFINITY) fail(`logits[${i}]`, "is +Infinity")
    if (x > bestValue) {
      best = i
      bestValue = x
    }
  }
  if (best < 0) fail("logits", "every logit is -Infinity: no token can be sampled")
  return best
}

/**
 * log-softmax of a row of logits (temperature 1), in f64. -Infinity logits get -Infinity;
 * NaN or +Infinity logits are a SamplingError.
 */
export function logSoftmax(logits: Logits): Float64Array {
  const z = rowNormaliser(logits, 0, logits.length, 1, logits[checkedArgmax(logits)] as number)
  const out = new Float64Array(logits.length)
  for (let i = 0; i < logits.length; i++) out[i] = logprobOf(logits, 0, i, 1, z)
  return out
}

/**
 * The most probable tokens, sorted by descending probability (lower index first on ties): at
 * least the top `k` when k < n, else at least enough to hold `needed` probability. Rather than
 * sort the whole vocabulary, it sorts only the tokens at or above a threshold, lowered until
 * they suffice; every token left out is less probable than every token kept, so the sorted
 * prefix is the same as a full sort's.
 */
function mostProbable(probs: Float64Array, maxProb: number, k: number, needed: number): number[] {
  const n = probs.length
  const byProbability = (a: number, b: number) =>
    (probs[b] as number) - (probs[a] as number) || a - b
  let threshold = maxProb
  for (let round = 0; round < 16; round++, threshold /= 16) {
    const chosen: number[] = []
    let sum = 0
    for (let i = 0; i < n; i++) {
      const p = probs[i] as number
      if (p >= threshold) {
        chosen.push(i)
        sum += p
      }
    }
    if (k < n ? chosen.length >= k : sum >= needed) return chosen.sort(byProbability)
  }
  return Array.from({ length: n }, (_, i) => i).sort(byProbability)
}

/**
 * Draw one token from a row of logits.
 *
 * temperature 0 is greedy: the argmax, lowest index on ties; it does not draw from `rng`.
 * Otherwise the distribution is softmax(logits / temperature); with `topK`, only the k most
 * probable tokens are kept; then, when topP < 1, only the smallest set of the most probable
 * remaining tokens whose (renormalised) probability reaches topP (at least one token). Ties in
 * probability are ordered by lower index. The kept probabilities are renormalised and one
 * `rng.next()` draw picks a token by inverse CDF (over tokens in index order when nothing is cut,
 * in descending probability otherwise), so a seed fixes the outcome.
 *
 * Returns the token, its log-probability under the unmodified policy (`logprob`) and under the
 * distribution sampled from (`sampledLogprob`); see SampledToken.
 */
export function sampleToken(
  logits: Logits,
  params: SamplingParams,
  rng: RandomSource,
): SampledToken {
  checkParams(params)
  const argmax = checkedArgmax(logits)
  const max = logits[argmax] as number
  const policy = rowNormaliser(logits, 0, logits.length, 1, max)
  const policyLogprob = (id: number) => logprobOf(logits, 0, id, 1, policy)

  const { temperature, topP, topK } = params
  if (temperature === 0) return { id: argmax, logprob: policyLogprob(argmax), sampledLogprob: 0 }

  const n = logits.length
  // Probabilities at the sampling temperature, normalised.
  const probs = new Float64Array(n)
  let z = 0
  for (let i = 0; i < n; i++) {
    const p = Math.exp(((logits[i] as number) - max) / temperature)
    probs[i] = p
    z += p
  }
  for (let i = 0; i < n; i++) probs[i] = (probs[i] as number) / z

  const k = topK === undefined ? n : Math.min(topK, n)
  // Candidates in descending probability (ties: lower index first), or undefined for index
  // order when nothing is cut (no sort needed).
  let order: number[] | undefined
  let kept = n
  if (k < n || topP < 1) {
    // Top-p over the top-k distribution renormalised: cumulative / mass(top k) ≥ topP.
    let mass = 0
    if (k === n) for (let i = 0; i < n; i++) mass += probs[i] as number
    order = mostProbable(probs, probs[argmax] as number, k, topP * mass)
    kept = Math.min(k, order.length)
    if (k < n) for (let i = 0; i < kept; i++) mass += probs[order[i] as number] as number
    if (topP < 1) {
      let cumulative = 0
      for (let i = 0; i < kept; i++) {
        cumulative += probs[order[i] as number] as number
        if (cumulative >= topP * mass) {
          kept = i + 1
          break
        }
      }
    }
  }
  const candidate = (i: number): number => (order === undefined ? i : (order[i] as number))

  let total = 0
  for (let i = 0; i < kept; i++) total += probs[candidate(i)] as number
  const u = rng.next() * total
  // The argmax has probability > 0 and is always kept, so a token is always found; when rounding
  // leaves u at or past the last cumulative sum, the last kept token with p > 0 is taken.
  let id = argmax
  let cumulative = 0
  for (let i = 0; i < kept; i++) {
    const t = candidate(i)
    const p = probs[t] as number
    if (p === 0) continue
    cumulative += p
    id = t
    if (u < cumulative) break
  }
  const sampledLogprob =
    ((logits[id] as number) - max) / temperature - Math.log(z) - Math.log(total)
  return { id, logprob: policyLogprob(id), sampledLogprob }
}
