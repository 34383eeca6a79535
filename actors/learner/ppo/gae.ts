/**
 * Generalised advantage estimation over the rows of one trajectory.
 *
 * Row r of a trajectory of n tokens (0 ≤ r < n − 1) is the state after the prefix ids[0..r]: the
 * critic's value V_r = V(s_{r+1}) and the reward r_r of emitting token r + 1 (the episode reward on
 * the row of the last generated token, 0 elsewhere). The recursion runs over every row, including
 * observation rows (tokens the policy did not generate): the environment's "steps" there have
 * no action to credit, but the value estimates on them still bootstrap the earlier rows, and
 * the critic is trained on them. Run it per trajectory, then concatenate for the loss.
 */

import { fail, requireFinite, requireInRange, requireLength } from "./errors.ts"

export interface GaeInput {
  readonly rewards: ArrayLike<number>
  readonly values: ArrayLike<number>
  /** Discount per row (token), in [0, 1]. */
  readonly gamma: number
  /** GAE λ in [0, 1]: 0 = one-step TD advantages, 1 = Monte-Carlo advantages. */
  readonly lambda: number
  /** V of the state after the last row (bootstrap for a truncated trajectory); 0 = terminal. */
  readonly lastValue?: number
}

export interface GaeResult {
  /** A_r = δ_r + γλ A_{r+1}, δ_r = r_r + γ V_{r+1} − V_r. */
  readonly advantages: Float64Array
  /** A_r + V_r: the critic's λ-return target. */
  readonly returns: Float64Array
}

const checkInput = (
  rewards: ArrayLike<number>,
  values: ArrayLike<number>,
  gamma: number,
  lastValue: number,
): void => {
  requireLength("values", values, rewards.length, "rewards")
  requireInRange("gamma", gamma, 0, 1)
  requireFinite("lastValue", lastValue)
  for (let r = 0; r < rewards.length; r++) {
    if (!Number.isFinite(rewards[r] as number)) fail(`rewards[${r}]`, "must be finite")
    if (!Number.isFinite(values[r] as number)) fail(`values[${r}]`, "must be finite")
  }
}

const recurse = (
  rewards: ArrayLike<number>,
  values: ArrayLike<number>,
  gamma: number,
  lambda: number,
  lastValue: number,
): GaeResult => {
  const n = rewards.length
  const advantages = new Float64Array(n)
  const returns = new Float64Array(n)
  let next = 0
  let nextValue = lastValue
  for (let r = n - 1; r >= 0; r--) {
    const v = values[r] as number
    const delta = (rewards[r] as number) + gamma * nextValue - v
    next = delta + gamma * lambda * next
    advantages[r] = next
    returns[r] = next + v
    nextValue = v
  }
  return { advantages, returns }
}

/** GAE(γ, λ) advantages and λ-returns over every row of one trajectory. */
export const gae = (input: GaeInput): GaeResult => {
  const lastValue = input.lastValue ?? 0
  checkInput(input.rewards, input.values, input.gamma, lastValue)
  requireInRange("lambda", input.lambda, 0, 1)
  return recurse(input.rewards, input.values, input.gamma, input.lambda, lastValue)
}

export interface DecoupledGaeInput {
  readonly rewards: ArrayLike<number>
  readonly values: ArrayLike<number>
  readonly gamma: number
  /** λ of the policy's advantages. */
  readonly actorLambda: number
  /** λ of the critic's targets; 1 (default) = the discounted Monte-Carlo return. */
  readonly criticLambda?: number
  /** As in {@link GaeInput.lastValue}. */
  readonly lastValue?: number
}

/**
 * Decoupled GAE (as in VC-PPO and VAPO): the advantages use `actorLambda` (lower variance for the policy);
 * the critic's targets are the `criticLambda`-returns, by default λ = 1, which are the
 * discounted rewards-to-go plus γ^(n−r) · lastValue, free of the critic's own bias.
 */
export const decoupledGae = (input: DecoupledGaeInput): GaeResult => {
  const lastValue = input.lastValue ?? 0
  const criticLambda = input.criticLambda ?? 1
  checkInput(input.rewards, input.values, input.gamma, lastValue)
  requireInRange("actorLambda", input.actorLambda, 0, 1)
  requireInRange("criticLambda", criticLambda, 0, 1)
  const actor = recurse(input.rewards, input.values, input.gamma, input.actorLambda, lastValue)
  if (criticLambda === input.actorLambda) return actor
  const critic = recurse(input.rewards, input.values, input.gamma, criticLambda, lastValue)
  return { advantages: actor.advantages, returns: critic.returns }
}

/**
 * Advantages whitened over the action rows: (A − mean) / (std + eps), mean and (population) std
 * taken over the rows with mask ≠ 0 only, since only those rows carry a policy loss. Rows with
 * mask 0 are copied unchanged. Apply it to the whole (global) batch, after GAE per trajectory;
 * with no action rows the input is returned as a copy. `center` false keeps the mean: A / (std +
 * eps), std still taken about the mean (for advantages a group baseline has already centred).
 */
export const normalizeAdvantages = (
  advantages: ArrayLike<number>,
  mask: ArrayLike<number>,
  eps = 1e-8,
  center = true,
): Float64Array => {
  requireLength("mask", mask, advantages.length, "advantages")
  if (!(eps >= 0)) fail("eps", `must be non-negative, got ${eps}`)
  const out = Float64Array.from(advantages)
  let count = 0
  let sum = 0
  for (let r = 0; r < out.length; r++) {
    if ((mask[r] as number) === 0) continue
    count++
    sum += out[r] as number
  }
  if (count === 0) return out
  const mean = sum / count
  let sq = 0
  for (let r = 0; r < out.length; r++) {
    if ((mask[r] as number) === 0) continue
    const d = (out[r] as number) - mean
    sq += d * d
  }
  const scale = 1 / (Math.sqrt(sq / count) + eps)
  for (let r = 0; r < out.length; r++) {
    if ((mask[r] as number) !== 0) out[r] = ((out[r] as number) - (center ? mean : 0)) * scale
  }
  return out
}
