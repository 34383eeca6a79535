import { create, type MessageInitShape } from "@bufbuild/protobuf"
import { describe, expect, it } from "vitest"
import { EpisodeWorkItemSchema } from "../../proto/index.ts"
import { DEFAULT_EPISODE_LIMITS, episodeLimitsOf } from "./limits.ts"

const item = (init: MessageInitShape<typeof EpisodeWorkItemSchema>) =>
  create(EpisodeWorkItemSchema, init)

describe("episodeLimitsOf", () => {
  it("reads unset and zero fields as the defaults, like every numeric JobSpec field", () => {
    expect(episodeLimitsOf(item({}))).toEqual(DEFAULT_EPISODE_LIMITS)
    expect(episodeLimitsOf(item({ limits: { maxTurns: 0, maxTokens: 0 } }))).toEqual(
      DEFAULT_EPISODE_LIMITS,
    )
  })

  it("honours every field the work item sets", () => {
    const l = episodeLimitsOf(
      item({
        limits: {
          maxTurns: 7,
          maxTokens: 900,
          wallClockSec: 60,
          observationMaxBytes: 100,
          observationMaxTokens: 20,
          commandTimeoutMs: 1500,
          blindObservations: true,
        },
        sampling: { maxTokens: 33 },
      }),
    )
    expect(l).toEqual({
      maxTurns: 7,
      maxTokens: 900,
      wallClockMs: 60_000,
      observationMaxBytes: 100,
      observationMaxTokens: 20,
      commandTimeoutMs: 1500,
      turnMaxTokens: 33,
      blindObservations: true,
    })
  })

  it("keeps the stricter of the job's wall clock and the task's agent timeout", () => {
    const both = (job: number, task: number) =>
      episodeLimitsOf(item({ limits: { wallClockSec: job }, task: { agentTimeoutSec: task } }))
        .wallClockMs
    expect(both(60, 30)).toBe(30_000)
    expect(both(30, 60)).toBe(30_000)
    expect(both(0, 45)).toBe(45_000)
    expect(both(45, 0)).toBe(45_000)
    expect(both(0, 0)).toBe(DEFAULT_EPISODE_LIMITS.wallClockMs)
  })
})
