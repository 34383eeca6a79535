import type { Subjects } from "../../services/bus/index.ts"
import type { SandboxHostOptions } from "./host.ts"

/** A test sandbox host's options: local driver specs in /sbx, small pool, quick heartbeats. */
export const testHostOptions = (
  subjects: Subjects,
  owner: string,
  overrides: Partial<SandboxHostOptions> = {},
): SandboxHostOptions => ({
  subjects,
  owner,
  defaults: {
    image: "local",
    workdir: "/sbx",
    ttlMs: 60_000,
    execTimeoutMs: 10_000,
    maxOutputBytes: 4096,
    maxGetBytes: 1 << 20,
  },
  pool: { warm: [], maxStarting: 2, createPerSecond: 50, createBurst: 4 },
  reapIntervalMs: 60_000,
  heartbeatMs: 100,
  perSandboxConcurrency: 2,
  ...overrides,
})
