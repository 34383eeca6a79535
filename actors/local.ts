import { randomUUID } from "node:crypto"
import { Effect, type Scope } from "effect"
import type { Bus, Subjects } from "../services/bus/index.ts"
import type { Metrics } from "../services/metrics/index.ts"
import {
  type ChosenDriverError,
  makeChosenDriver,
  runSandboxHost,
  SandboxDriver,
  type SandboxDriverChoice,
} from "./sandbox/index.ts"
import { runVerifier } from "./verifier/index.ts"

/**
 * A sandbox host and a verifier, serving `subjects` on the current bus. The host runs on the
 * driver `driver` names (default docker; see sandbox/choice.ts: "auto" puts base-image tasks on
 * bwrap, "local" is a shell on this machine and no security boundary; T1_BWRAP names the bwrap
 * program). The driver is made here,
 * before anything is served: one that cannot run fails this effect with the reason and the fix.
 */
export const startSandboxAndVerifier = (
  subjects: Subjects,
  options: { readonly concurrency?: number; readonly driver?: SandboxDriverChoice } = {},
): Effect.Effect<void, ChosenDriverError, Bus | Metrics | Scope.Scope> =>
  Effect.gen(function* () {
    const owner = `t1-test-${randomUUID().slice(0, 8)}`
    const bwrap = process.env.T1_BWRAP
    const driver = yield* makeChosenDriver(options.driver ?? "docker", {
      owner,
      interruptGraceMs: 1000,
      ...(bwrap === undefined || bwrap === "" ? {} : { bwrap }),
    })
    yield* Effect.forkScoped(
      runSandboxHost({
        subjects,
        owner,
        defaults: {
          image: "t1-base:latest",
          workdir: "/app",
          ttlMs: 10 * 60_000,
          execTimeoutMs: 30_000,
          maxOutputBytes: 64 * 1024,
          maxGetBytes: 1 << 20,
        },
        pool: { warm: [], maxStarting: 4, createPerSecond: 20, createBurst: 8 },
        reapIntervalMs: 60_000,
        heartbeatMs: 5000,
        perSandboxConcurrency: 2,
      }).pipe(Effect.provideService(SandboxDriver, driver)),
    )
    yield* Effect.forkScoped(runVerifier({ subjects, concurrency: options.concurrency ?? 4 }))
  })
