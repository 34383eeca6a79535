import { SamplingError } from "./errors.ts"

/** Why generation ended. */
export type StopReason = "stop_token" | "stop_sequence" | "max_tokens"

export interface StopCriteria {
  /** Tokens that end generation when generated (end-of-turn, end-of-text). */
  readonly stopTokenIds: ReadonlySet<number>
  /** Token sequences that end generation when the output ends with one (each non-empty). */
  readonly stopSequences?: readonly (readonly number[])[]
  /** The most tokens to generate. */
  readonly maxTokens: number
}

function fail(field: string, reason: string): never {
  throw new SamplingError({ field, reason })
}

const endsWith = (generated: readonly number[], sequence: readonly number[]): boolean => {
  const offset = generated.length - sequence.length
  if (offset < 0) return false
  for (let i = 0; i < sequence.length; i++) {
    if (generated[offset + i] !== sequence[i]) return false
  }
  return true
}

/**
 * Whether generation should stop after the tokens generated so far (call after each new token),
 * and why; undefined to continue. Checked in this order, so the model's own stop wins over the
 * length limit on the same token:
 *
 * - "stop_token": the last token is one of stopTokenIds;
 * - "stop_sequence": the tokens end with one of stopSequences;
 * - "max_tokens": maxTokens tokens have been generated.
 *
 * The stop token or sequence is part of `generated` (keep it for training; strip it for display).
 */
export function checkStop(
  generated: readonly number[],
  criteria: StopCriteria,
): StopReason | undefined {
  const { stopTokenIds, stopSequences = [], maxTokens } = criteria
  if (!Number.isSafeInteger(maxTokens) || maxTokens < 0) {
    fail("maxTokens", `must be a non-negative integer, got ${maxTokens}`)
  }
  stopSequences.forEach((s, i) => {
    if (s.length === 0) fail(`stopSequences[${i}]`, "is empty (it would stop before any token)")
  })
  const last = generated[generated.length - 1]
  if (last !== undefined && stopTokenIds.has(last)) return "stop_token"
  if (stopSequences.some((s) => endsWith(generated, s))) return "stop_sequence"
  if (generated.length >= maxTokens) return "max_tokens"
  return undefined
}
