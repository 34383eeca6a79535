/**
 * The circuit-breaker flags shared by the actors that spread work over pool members (the sandbox
 * host over its engine, the sampler over engine replicas).
 */
import type { BreakerOptions } from "../services/breaker/index.ts"
import { DEFAULT_BREAKER_OPTIONS } from "../services/breaker/index.ts"
import { type FlagValues, flagInt } from "./hosted.ts"

export const breakerFlags = {
  "breaker-failures": { type: "string" },
  "breaker-window-ms": { type: "string" },
  "breaker-cooldown-ms": { type: "string" },
} as const

export const breakerFlagsHelp = (
  member: string,
) => `  --breaker-failures N         consecutive infra failures that take ${member} out of service (T1_BREAKER_FAILURES; default ${DEFAULT_BREAKER_OPTIONS.failures})
  --breaker-window-ms MS       a failure later than this after the previous one starts the count again (T1_BREAKER_WINDOW_MS; default ${DEFAULT_BREAKER_OPTIONS.windowMs})
  --breaker-cooldown-ms MS     how long ${member} stays out before one probe request (T1_BREAKER_COOLDOWN_MS; default ${DEFAULT_BREAKER_OPTIONS.cooldownMs})`

/** The breaker options of the flags (or environment); ActorConfigError on a bad value. */
export const breakerOptionsOf = (flags: FlagValues): BreakerOptions => ({
  failures: flagInt(
    flags,
    "breaker-failures",
    "T1_BREAKER_FAILURES",
    DEFAULT_BREAKER_OPTIONS.failures,
    1,
  ),
  windowMs: flagInt(
    flags,
    "breaker-window-ms",
    "T1_BREAKER_WINDOW_MS",
    DEFAULT_BREAKER_OPTIONS.windowMs,
    1,
  ),
  cooldownMs: flagInt(
    flags,
    "breaker-cooldown-ms",
    "T1_BREAKER_COOLDOWN_MS",
    DEFAULT_BREAKER_OPTIONS.cooldownMs,
    1,
  ),
})
