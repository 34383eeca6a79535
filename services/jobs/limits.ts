/**
 * One episode's limits as its work item resolves them, with the contract's defaults applied by
 * the same rule as the rest of a job's spec (unset or zero means the default): the sampler runs
 * episodes by them, and they are documented with the JobSpec in docs/grpc.md and docs/cli.md.
 */
import type { EpisodeWorkItem } from "../../proto/index.ts"
import { orDefault } from "./schedule.ts"

/** The effective limits of one episode, with t1's defaults where the work item leaves 0. */
export interface EpisodeLimits {
  readonly maxTurns: number
  /** Context budget: prompt + generated + observations, in tokens. */
  readonly maxTokens: number
  readonly wallClockMs: number
  readonly observationMaxBytes: number
  readonly observationMaxTokens: number
  readonly commandTimeoutMs: number
  /** Tokens one policy call may generate. */
  readonly turnMaxTokens: number
  /** Command outputs reach the policy as empty observations (an evaluation control). */
  readonly blindObservations: boolean
}

export const DEFAULT_EPISODE_LIMITS: EpisodeLimits = {
  maxTurns: 50,
  maxTokens: 4096,
  wallClockMs: 30 * 60_000,
  observationMaxBytes: 4096,
  observationMaxTokens: 512,
  commandTimeoutMs: 30_000,
  turnMaxTokens: 256,
  blindObservations: false,
}

/**
 * The work item's limits over the defaults. The wall clock is the stricter of the job's limit
 * and the task's own agent timeout.
 */
export const episodeLimitsOf = (
  item: EpisodeWorkItem,
  defaults: EpisodeLimits = DEFAULT_EPISODE_LIMITS,
): EpisodeLimits => {
  const l = item.limits
  const taskMs = (item.task?.agentTimeoutSec ?? 0) * 1000
  const jobMs = (l?.wallClockSec ?? 0) * 1000
  const wall =
    taskMs > 0 && jobMs > 0
      ? Math.min(taskMs, jobMs)
      : orDefault(taskMs || jobMs, defaults.wallClockMs)
  return {
    maxTurns: orDefault(l?.maxTurns, defaults.maxTurns),
    maxTokens: orDefault(l?.maxTokens, defaults.maxTokens),
    wallClockMs: wall,
    observationMaxBytes: orDefault(l?.observationMaxBytes, defaults.observationMaxBytes),
    observationMaxTokens: orDefault(l?.observationMaxTokens, defaults.observationMaxTokens),
    commandTimeoutMs: orDefault(l?.commandTimeoutMs, defaults.commandTimeoutMs),
    turnMaxTokens: orDefault(item.sampling?.maxTokens, defaults.turnMaxTokens),
    // proto3 cannot tell false from unset: true turns it on, otherwise the default applies.
    blindObservations: l?.blindObservations === true || defaults.blindObservations,
  }
}
