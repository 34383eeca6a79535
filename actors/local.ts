import { randomUUID } from "node:crypto"
import { Effect, type Scope } from "effect"
import type { Bus, Subjects } from "../services/bus/index.ts"
import type { Metrics } from "../services/metrics/index.ts"
import {
  BwrapDriverLive,
  DockerDriverLive,
  LocalDriverLive,
  runSandboxHost,
} from "./sandbox/index.ts"
import { runVerifier } from "./verifier/index.ts"

/**
 * A sandbox host and a verifier, serving `subjects` on the current bus. The host runs on the
 * Docker engine unless `driver` is "local" (a shell on this machine in private namespaces: not a
 * security boundary, for trusted synthetic tasks where container start-up would dominate) or
 * "bwrap" (namespaces over the base image's files, a boundary that starts in milliseconds).
 */
export const startSandboxAndVerifier = (
  subjects: Subjects,
  options: { readonly concurrency?: number; readonly driver?: "docker" | "local" | "bwrap" } = {},
): Effect.Effect<void, never, Bus | Metrics | Scope.Scope> =>
  Effect.gen(function* () {
    const owner = `t1-test-${randomUUID().slice(0, 8)}`
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
      }).pipe(
        Effect.provide(
          options.driver === "local"
            ? LocalDriverLive({ owner })
            : options.driver === "bwrap"
              ? BwrapDriverLive({ owner, interruptGraceMs: 1000 })
              : DockerDriverLive({ ownerId: owner, interruptGraceMs: 1000 }),
        ),
      ),
    )
    yield* Effect.forkScoped(runVerifier({ subjects, concurrency: options.concurrency ?? 4 }))
  })
