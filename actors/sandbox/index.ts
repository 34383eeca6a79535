import { hostname } from "node:os"
import { Effect } from "effect"
import { breakerFlags, breakerFlagsHelp, breakerOptionsOf } from "../breaker-flags.ts"
import {
  ActorConfigError,
  type FlagValues,
  flagInt,
  flagText,
  type HostedActor,
} from "../hosted.ts"
import { isSandboxDriverChoice, makeChosenDriver, type SandboxDriverChoice } from "./choice.ts"
import { SandboxDriver, sandboxSpec } from "./driver.ts"
import { runSandboxHost } from "./host.ts"
import { BASE_IMAGE } from "./image/index.ts"

export {
  autoRouter,
  baseImageDriver,
  type ChosenDriverError,
  type ChosenDriverOptions,
  checkBwrapRuns,
  isBaseImage,
  isSandboxDriverChoice,
  LOCAL_DRIVER_WARNING,
  makeChosenDriver,
  SANDBOX_DRIVERS,
  type SandboxDriverChoice,
} from "./choice.ts"
export {
  type SandboxClient,
  type SandboxClientError,
  SandboxRequestFailed,
  sandboxClient,
} from "./client.ts"
export * from "./driver.ts"
export * from "./errors.ts"
export { runSandboxHost, type SandboxHostOptions } from "./host.ts"
export { reapOnce, startReaper } from "./reaper.ts"
export {
  makeSandboxPool,
  type PoolOptions,
  type SandboxPool,
  templateKey,
  type WarmTemplate,
} from "./warm-pool.ts"

const text = (flags: FlagValues, name: string, env: string, fallback: string): string =>
  flagText(flags, name, env) ?? fallback

/**
 * The host's default creation pacing: it spares a Docker engine (auto may send creates there);
 * a bwrap create is ~35 ms of this machine's own work, and 64 creates at 10 a second queued
 * ~5 s each in test:load.
 */
export const creationPacing = (driver: SandboxDriverChoice) =>
  driver === "bwrap"
    ? { maxStarting: 16, createPerSecond: 100 }
    : { maxStarting: 4, createPerSecond: 10 }

export const sandboxFlagsHelp = `  --driver auto|bwrap|docker|local  (T1_SANDBOX_DRIVER; default auto: bwrap for base-image tasks when it works here, docker for tasks with their own images and when bwrap cannot run (said once, with why); bwrap: namespaces over the image's exported files, needs root, bubblewrap and user namespaces; local: this host's shell, not a security boundary)
  --owner ID                   owner label, stable across restarts (T1_SANDBOX_OWNER; default sandbox-<hostname>)
  --image IMAGE                image when a request names none (T1_SANDBOX_IMAGE; default ${BASE_IMAGE})
  --workdir PATH               shell directory when a request names none (default /app)
  --warm N                     ready sandboxes of the default spec kept warm (T1_SANDBOX_WARM; default 0)
  --max-starting N             sandboxes being created at once (default 4; --driver bwrap 16)
  --create-rate N              creations per second, token bucket (default 10; --driver bwrap 100; burst = --max-starting * 2)
  --exec-timeout-ms MS         default command timeout (default 60000)
  --max-output-bytes N         default output cap, head + tail (default 65536)
  --idle-ttl-sec S             a leased sandbox unused this long is destroyed (default 1800)
  --reap-interval-sec S        expired-sandbox sweep period (default 60)
  --sandbox-root DIR           local and bwrap drivers: where sandbox directories live
  --bwrap PATH                 bwrap driver: the bwrap program (T1_BWRAP; default /usr/bin/bwrap)
  --network-firewall on|off    docker driver: iptables rules keep sandboxes with network allowed off this machine (T1_SANDBOX_NETWORK_FIREWALL; default on; needs root beside the engine)
${breakerFlagsHelp("this host (it leaves the create queue group)")}`

/** `t1 actor sandbox`: one sandbox host (a Docker engine, or this machine's shell). */
export const sandboxActor: HostedActor = {
  summary:
    "creates sandboxes and runs their shells (bwrap, docker engine or local), warm pools, reaper",
  flags: {
    driver: { type: "string" },
    owner: { type: "string" },
    image: { type: "string" },
    workdir: { type: "string" },
    warm: { type: "string" },
    "max-starting": { type: "string" },
    "create-rate": { type: "string" },
    "exec-timeout-ms": { type: "string" },
    "max-output-bytes": { type: "string" },
    "idle-ttl-sec": { type: "string" },
    "reap-interval-sec": { type: "string" },
    "sandbox-root": { type: "string" },
    bwrap: { type: "string" },
    "network-firewall": { type: "string" },
    ...breakerFlags,
  },
  flagsHelp: sandboxFlagsHelp,
  run: ({ subjects }, flags) => {
    const driverChoice = text(flags, "driver", "T1_SANDBOX_DRIVER", "auto")
    if (!isSandboxDriverChoice(driverChoice)) {
      throw new ActorConfigError(
        `--driver must be auto, docker, local or bwrap, got ${JSON.stringify(driverChoice)}`,
      )
    }
    const owner = text(flags, "owner", "T1_SANDBOX_OWNER", `sandbox-${hostname()}`)
    const image = text(flags, "image", "T1_SANDBOX_IMAGE", BASE_IMAGE)
    const workdir = text(flags, "workdir", "T1_SANDBOX_WORKDIR", "/app")
    const warm = flagInt(flags, "warm", "T1_SANDBOX_WARM", 0)
    const pacing = creationPacing(driverChoice)
    const maxStarting = flagInt(
      flags,
      "max-starting",
      "T1_SANDBOX_MAX_STARTING",
      pacing.maxStarting,
      1,
    )
    const createRate = flagInt(
      flags,
      "create-rate",
      "T1_SANDBOX_CREATE_RATE",
      pacing.createPerSecond,
      1,
    )
    const idleTtlMs = flagInt(flags, "idle-ttl-sec", "T1_SANDBOX_IDLE_TTL_SEC", 1800, 1) * 1000
    const root = text(flags, "sandbox-root", "T1_SANDBOX_ROOT", "")
    const defaults = {
      image,
      workdir,
      ttlMs: idleTtlMs,
      execTimeoutMs: flagInt(flags, "exec-timeout-ms", "T1_SANDBOX_EXEC_TIMEOUT_MS", 60_000, 1),
      maxOutputBytes: flagInt(flags, "max-output-bytes", "T1_SANDBOX_MAX_OUTPUT_BYTES", 65_536, 64),
      maxGetBytes: 64 * 1024 * 1024,
    }
    const template = sandboxSpec({ image, workdir, ttlMs: idleTtlMs })
    const host = runSandboxHost({
      subjects,
      owner,
      defaults,
      pool: {
        warm: warm > 0 ? [{ spec: template, size: warm }] : [],
        maxStarting,
        createPerSecond: createRate,
        createBurst: maxStarting * 2,
      },
      reapIntervalMs:
        flagInt(flags, "reap-interval-sec", "T1_SANDBOX_REAP_INTERVAL_SEC", 60, 1) * 1000,
      heartbeatMs: 5000,
      perSandboxConcurrency: 4,
      breaker: breakerOptionsOf(flags),
    })
    const firewall = text(flags, "network-firewall", "T1_SANDBOX_NETWORK_FIREWALL", "on")
    if (firewall !== "on" && firewall !== "off")
      throw new ActorConfigError(
        `--network-firewall must be on or off, got ${JSON.stringify(firewall)}`,
      )
    const bwrap = flagText(flags, "bwrap", "T1_BWRAP")
    return Effect.gen(function* () {
      const driver = yield* makeChosenDriver(driverChoice, {
        owner,
        networkFirewall: firewall === "on",
        ...(root === "" ? {} : { root }),
        ...(bwrap === undefined ? {} : { bwrap }),
      })
      yield* Effect.logInfo(
        `sandbox host ${owner}: ${driverChoice === "auto" && driver.kind === "bwrap" ? "auto: bwrap for base-image tasks, docker for tasks with their own images" : `${driver.kind} driver`}`,
      )
      return yield* host.pipe(Effect.provideService(SandboxDriver, driver))
    }).pipe(Effect.scoped)
  },
}

export {
  BwrapDriverLive,
  type BwrapDriverOptions,
  BwrapUnsupported,
  killBwrapSandboxProcesses,
  makeBwrapDriver,
  probeBwrap,
} from "./bwrap/index.ts"
// The surface other folders use.
export { connectDocker, DockerDriverLive, dockerEngineAvailable } from "./docker/index.ts"
export {
  BASE_IMAGE,
  BaseImageBuildFailed,
  BUILD_NETWORKS,
  type BuildNetwork,
  buildBaseImage,
  buildTaskImage,
  type ImageAliases,
  type ResolveTaskImageError,
  resolvedWireTask,
  resolveTaskImage,
  taskBuildNetwork,
  wireTaskFor,
} from "./image/index.ts"
export { LocalDriverLive, makeLocalDriver } from "./local/index.ts"
export {
  ensureToolchain,
  TOOLCHAIN_BASH,
  TOOLCHAIN_BIN,
  TOOLCHAIN_PYTHON,
  TOOLCHAIN_TIMEOUT,
} from "./toolchain/index.ts"
