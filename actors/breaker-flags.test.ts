import { afterEach, describe, expect, it } from "vitest"
import { subjectsFor } from "../services/bus/index.ts"
import { breakerOptionsOf } from "./breaker-flags.ts"
import { ActorConfigError } from "./hosted.ts"
import { samplerActor } from "./sampler/hosted.ts"
import { sandboxActor } from "./sandbox/index.ts"

const context = { subjects: subjectsFor("flagtest"), concurrency: 1, shutdownGraceMs: 1000 }

describe("circuit-breaker and firewall flags", () => {
  afterEach(() => {
    delete process.env.T1_BREAKER_COOLDOWN_MS
  })

  it("reads the breaker from flags, then the environment, then the defaults", () => {
    expect(breakerOptionsOf({})).toEqual({ failures: 5, windowMs: 60_000, cooldownMs: 30_000 })
    process.env.T1_BREAKER_COOLDOWN_MS = "1234"
    expect(breakerOptionsOf({ "breaker-failures": "2", "breaker-window-ms": "500" })).toEqual({
      failures: 2,
      windowMs: 500,
      cooldownMs: 1234,
    })
    expect(breakerOptionsOf({ "breaker-cooldown-ms": "99" }).cooldownMs).toBe(99)
  })

  it("refuses values a breaker cannot honour, naming the flag", () => {
    expect(() => breakerOptionsOf({ "breaker-failures": "0" })).toThrow(
      /--breaker-failures must be an integer >= 1, got "0"/,
    )
    expect(() => breakerOptionsOf({ "breaker-window-ms": "soon" })).toThrow(ActorConfigError)
  })

  it("refuses breaker flags on a sampler without engine replicas", () => {
    expect(() => samplerActor.run(context, { "breaker-failures": "3" })).toThrow(
      /--breaker-failures applies to engine replicas \(--policy sglang or vllm\)/,
    )
  })

  it("refuses a --network-firewall that is neither on nor off", () => {
    expect(() => sandboxActor.run(context, { "network-firewall": "maybe" })).toThrow(
      /--network-firewall must be on or off, got "maybe"/,
    )
  })
})
