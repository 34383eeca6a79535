/**
 * Group statistics of a batch: episodes come in groups of `samples_per_task` rollouts of one task
 * (EpisodeEnd.group_id), which gives every trajectory a baseline that needs no critic.
 */
import { fail, requireLength } from "./errors.ts"

/**
 * A trajectory's reward as the learner trains on it: the passing tests over the task's tests
 * (1 = every test passes), so that tasks with many tests do not outweigh tasks with few. When
 * the number of tests is unknown (0), the reward is taken as it is.
 */
export const rewardPerTest = (reward: number, testsTotal: number | undefined): number => {
  if (!Number.isFinite(reward)) fail("reward", `must be finite, got ${reward}`)
  return testsTotal !== undefined && testsTotal > 0 ? reward / testsTotal : reward
}

/** The key a trajectory is grouped under: its group id, or a group of its own without one. */
const groupKeys = (groups: ReadonlyArray<string | undefined>): string[] =>
  groups.map((g, i) => (g === undefined || g === "" ? `\u0000${i}` : g))

/**
 * Leave-one-out (RLOO) centred rewards: for a trajectory i of a group G with k ≥ 2 members,
 *
 *   c_i = R_i − (Σ_{j ∈ G} R_j − R_i) / (k − 1)
 *
 * the reward minus the mean reward of the other members, an unbiased baseline because it does
 * not depend on the trajectory's own actions. A trajectory alone in its group (k = 1, or no
 * group id) has no baseline: c_i = 0 and `alone[i]` is 1.
 */
export const leaveOneOutCentred = (
  rewards: ArrayLike<number>,
  groups: ReadonlyArray<string | undefined>,
): { readonly centred: Float64Array; readonly alone: Uint8Array } => {
  requireLength("groups", groups, rewards.length, "rewards")
  const keys = groupKeys(groups)
  const sums = new Map<string, { sum: number; count: number }>()
  keys.forEach((k, i) => {
    const r = rewards[i] as number
    if (!Number.isFinite(r)) fail(`rewards[${i}]`, `must be finite, got ${r}`)
    const s = sums.get(k) ?? { sum: 0, count: 0 }
    s.sum += r
    s.count += 1
    sums.set(k, s)
  })
  const centred = new Float64Array(rewards.length)
  const alone = new Uint8Array(rewards.length)
  keys.forEach((k, i) => {
    const s = sums.get(k) as { sum: number; count: number }
    const r = rewards[i] as number
    if (s.count < 2) alone[i] = 1
    else centred[i] = r - (s.sum - r) / (s.count - 1)
  })
  return { centred, alone }
}

/**
 * Which trajectories belong to a zero-variance group: a group of at least two members whose
 * rewards are all equal (under a group baseline every advantage in it is 0, so it teaches
 * nothing). Trajectories without a group id are never in one.
 */
export const zeroVarianceMembers = (
  rewards: ArrayLike<number>,
  groups: ReadonlyArray<string | undefined>,
): Uint8Array => {
  requireLength("groups", groups, rewards.length, "rewards")
  const keys = groupKeys(groups)
  const seen = new Map<string, { first: number; count: number; equal: boolean }>()
  keys.forEach((k, i) => {
    const r = rewards[i] as number
    const s = seen.get(k)
    if (s === undefined) seen.set(k, { first: r, count: 1, equal: true })
    else {
      s.count += 1
      if (r !== s.first) s.equal = false
    }
  })
  return Uint8Array.from(keys, (k) => {
    const s = seen.get(k) as { count: number; equal: boolean }
    return s.count >= 2 && s.equal ? 1 : 0
  })
}
