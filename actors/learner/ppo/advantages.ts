/**
 * The advantages and critic targets of a batch, per trajectory, from the rewards, the critic's
 * values at the start of the update and the groups.
 */
import { requireLength } from "./errors.ts"
import { decoupledGae, normalizeAdvantages } from "./gae.ts"
import { leaveOneOutCentred } from "./group.ts"

/**
 * - `critic`: GAE(γ, actorLambda) with the critic's values;
 * - `group`: the leave-one-out centred reward c_i (see leaveOneOutCentred) on every row;
 * - `group+critic`: GAE with the critic on c_i in place of the reward.
 */
export type AdvantageMode = "critic" | "group" | "group+critic"

export interface AdvantageItem {
  /** [rows] the trajectory's reward on its reward row, 0 elsewhere (see trajectoryRows). */
  readonly rewards: ArrayLike<number>
  /** The row the reward sits on; −1 when the trajectory has no generated token. */
  readonly rewardRow: number
  /** [rows] 1 on the rows of generated tokens. */
  readonly action: ArrayLike<number>
  /** [rows] the critic's values at the start of the update. */
  readonly values: ArrayLike<number>
  /** The trajectory's reward (the one on its reward row). */
  readonly reward: number
  /** Its rollout group; undefined or empty: alone. */
  readonly groupId?: string | undefined
  /** Multiplies its advantages (after normalisation): the weight of its policy loss. */
  readonly weight?: number
}

export interface AdvantageOptions {
  readonly mode: AdvantageMode
  readonly gamma: number
  readonly actorLambda: number
  readonly criticLambda: number
  /** Whiten the advantages over every generated token of the batch (mean 0, std 1). */
  readonly normalize: boolean
  /**
   * With `normalize`: subtract the token mean (true) or only divide by the std (false). Default
   * true.
   */
  readonly center?: boolean
}

export interface BatchAdvantages {
  /** Per trajectory, [rows]: what the policy loss uses. */
  readonly advantages: Float64Array[]
  /** Per trajectory, [rows]: the critic's targets (criticLambda-returns). */
  readonly returns: Float64Array[]
  /** Mean and (population) std over generated tokens before normalisation and weights. */
  readonly mean: number
  readonly std: number
  /** Per trajectory: 1 when it had no group-mate (no group baseline; c = 0). */
  readonly alone: Uint8Array
}

/**
 * Advantages and returns of a batch. Returns come from GAE with the critic and `criticLambda`
 * on the reward (`critic`, `group`) or on the centred reward (`group+critic`); the advantages as
 * the mode says, then whitened over the batch's generated tokens when `normalize`, then
 * multiplied by each trajectory's weight. The clipped PPO objective min(ρA, clip(ρ)A) is
 * positively homogeneous in A, so weighting A weights the trajectory's policy loss exactly.
 */
export const batchAdvantages = (
  items: ReadonlyArray<AdvantageItem>,
  o: AdvantageOptions,
): BatchAdvantages => {
  items.forEach((it, i) => {
    requireLength(`items[${i}].values`, it.values, it.rewards.length, "rewards")
    requireLength(`items[${i}].action`, it.action, it.rewards.length, "rewards")
  })
  const { centred, alone } = leaveOneOutCentred(
    items.map((it) => it.reward),
    items.map((it) => it.groupId),
  )
  const advantages: Float64Array[] = []
  const returns: Float64Array[] = []
  items.forEach((it, i) => {
    const c = centred[i] as number
    const rewards = Float64Array.from(it.rewards)
    if (o.mode === "group+critic" && it.rewardRow >= 0) rewards[it.rewardRow] = c
    const g = decoupledGae({
      rewards,
      values: it.values,
      gamma: o.gamma,
      actorLambda: o.actorLambda,
      criticLambda: o.criticLambda,
    })
    returns.push(g.returns)
    advantages.push(o.mode === "group" ? new Float64Array(rewards.length).fill(c) : g.advantages)
  })
  let count = 0
  let sum = 0
  let sq = 0
  items.forEach((it, i) => {
    const a = advantages[i] as Float64Array
    for (let r = 0; r < a.length; r++) {
      if ((it.action[r] as number) === 0) continue
      count++
      sum += a[r] as number
      sq += (a[r] as number) ** 2
    }
  })
  const mean = count === 0 ? 0 : sum / count
  const std = count === 0 ? 0 : Math.sqrt(Math.max(0, sq / count - mean * mean))
  let out = advantages
  if (o.normalize && count > 0) {
    const total = advantages.reduce((n, a) => n + a.length, 0)
    const all = new Float64Array(total)
    const mask = new Uint8Array(total)
    let at = 0
    items.forEach((it, i) => {
      const a = advantages[i] as Float64Array
      all.set(a, at)
      for (let r = 0; r < a.length; r++) mask[at + r] = (it.action[r] as number) === 0 ? 0 : 1
      at += a.length
    })
    const whitened = normalizeAdvantages(all, mask, 1e-8, o.center ?? true)
    at = 0
    out = advantages.map((a) => {
      const part = whitened.slice(at, at + a.length)
      at += a.length
      return part
    })
  }
  items.forEach((it, i) => {
    const w = it.weight ?? 1
    if (w === 1) return
    const a = out[i] as Float64Array
    for (let r = 0; r < a.length; r++) a[r] = (a[r] as number) * w
  })
  return { advantages: out, returns, mean, std, alone }
}
