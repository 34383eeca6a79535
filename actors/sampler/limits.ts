import type { EpisodeWorkItem } from "../../proto/index.ts"

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
}

export const DEFAULT_LIMITS: EpisodeLimits = {
  maxTurns: 50,
  maxTokens: 4096,
  wallClockMs: 30 * 60_000,
  observationMaxBytes: 4096,
  observationMaxTokens: 512,
  commandTimeoutMs: 30_000,
  turnMaxTokens: 256,
}

const pick = (value: number | undefined, fallback: number) =>
  value && value > 0 ? value : fallback

/**
 * The work item's limits over the defaults. The wall clock is the stricter of the job's limit
 * and the task's own agent timeout.
 */
export const limitsOf = (
  item: EpisodeWorkItem,
  defaults: EpisodeLimits = DEFAULT_LIMITS,
): EpisodeLimits => {
  const l = item.limits
  const taskMs = (item.task?.agentTimeoutSec ?? 0) * 1000
  const jobMs = (l?.wallClockSec ?? 0) * 1000
  const wall =
    taskMs > 0 && jobMs > 0 ? Math.min(taskMs, jobMs) : pick(taskMs || jobMs, defaults.wallClockMs)
  return {
    maxTurns: pick(l?.maxTurns, defaults.maxTurns),
    maxTokens: pick(l?.maxTokens, defaults.maxTokens),
    wallClockMs: wall,
    observationMaxBytes: pick(l?.observationMaxBytes, defaults.observationMaxBytes),
    observationMaxTokens: pick(l?.observationMaxTokens, defaults.observationMaxTokens),
    commandTimeoutMs: pick(l?.commandTimeoutMs, defaults.commandTimeoutMs),
    turnMaxTokens: pick(item.sampling?.maxTokens, defaults.turnMaxTokens),
  }
}
