import { Context, type Effect } from "effect"
import type { SandboxError } from "./errors.ts"

/** Labels every t1 sandbox carries, so a reaper can find what it owns after a crash. */
export const LABELS = {
  managed: "t1.managed",
  owner: "t1.owner",
  job: "t1.job",
  episode: "t1.episode",
  /** Unix milliseconds after which the sandbox may be reaped. */
  expiresAt: "t1.expires-at",
} as const

export interface SandboxSpec {
  /** Image reference (docker) or ignored (local). */
  readonly image: string
  /** CPUs (fractional allowed); 0 = engine default. */
  readonly cpus: number
  /** Memory limit in MiB; 0 = engine default. */
  readonly memoryMb: number
  /** Max processes; 0 = default (256). */
  readonly pidsLimit: number
  /** False (the default): no network interface but loopback. */
  readonly network: boolean
  /** User to run as ("" = image default). */
  readonly user: string
  /** Working directory of the shell, e.g. /app. */
  readonly workdir: string
  readonly env: Readonly<Record<string, string>>
  /** Extra labels (job, episode…); LABELS.managed/owner/expiresAt are added by the driver. */
  readonly labels: Readonly<Record<string, string>>
  /** Time to live: the reaper removes the sandbox after this. */
  readonly ttlMs: number
}

export interface SandboxInfo {
  readonly id: string
  readonly labels: Readonly<Record<string, string>>
  readonly createdAtMs: number
  readonly expiresAtMs: number
}

export interface ExecOptions {
  /** The foreground job is interrupted (like Ctrl-C) after this; the session survives. */
  readonly timeoutMs: number
  /** Output kept: the first and last half of this many bytes, with a marker between. */
  readonly maxOutputBytes: number
}

export interface ExecResult {
  /** stdout and stderr interleaved as a terminal shows them; raw bytes, maybe not UTF-8. */
  readonly output: Uint8Array
  /** The command's exit status; 130 when interrupted by the timeout; -1 when the shell died. */
  readonly exitCode: number
  readonly timedOut: boolean
  readonly truncated: boolean
  /** Bytes the command wrote in all, before truncation. */
  readonly totalBytes: number
  /** The shell died (or had to be killed) during this command and a fresh one was started. */
  readonly sessionRestarted: boolean
  readonly durationMs: number
}

export interface SealOptions {
  /**
   * Absolute directories whose files must be the image's own when the tests run (the Python
   * site directories the tests import from). A component may hold `*` (any characters but `/`),
   * e.g. `/usr/local/lib/python3.1*` then `/site-packages`.
   */
  readonly pristinePaths: ReadonlyArray<string>
  /** The whole seal (stop, restart, restore) gives up after this long. */
  readonly timeoutMs: number
}

/** What sealing a sandbox did. */
export interface SealReport {
  /** The sandbox has the verifier toolchain mounted. False: it was created without, nothing was done. */
  readonly toolchain: boolean
  /** Processes that ran in the sandbox besides its init and main process, all gone now. */
  readonly stopped: number
  /** Files under pristinePaths the agent changed or deleted, put back from the image (capped list). */
  readonly restored: ReadonlyArray<string>
  readonly restoredCount: number
  /** Files under pristinePaths the agent added, removed (capped list). */
  readonly removed: ReadonlyArray<string>
  readonly removedCount: number
  readonly durationMs: number
}

export interface SandboxDriverShape {
  readonly kind: "docker" | "local" | "bwrap"
  readonly create: (spec: SandboxSpec) => Effect.Effect<SandboxInfo, SandboxError>
  /** Runs a command in the sandbox's persistent shell (cwd, env, jobs persist across calls). */
  readonly exec: (
    id: string,
    command: string,
    options: ExecOptions,
  ) => Effect.Effect<ExecResult, SandboxError>
  /**
   * Runs `argv` as a new process in the sandbox, as its user, outside the persistent shell (whose
   * state the agent controls): the verifier's guarded path. Drivers that cannot leave it out.
   */
  readonly execArgv?: (
    id: string,
    argv: ReadonlyArray<string>,
    options: ExecOptions,
  ) => Effect.Effect<ExecResult, SandboxError>
  /**
   * Makes the sandbox safe to verify, from outside it (the verifier calls it before the tests):
   * no process the agent started survives, its init is one the agent never ran beside, and files
   * the agent changed under `pristinePaths` are the image's again. Drivers that cannot leave it
   * out, and the verifier's outcomes then say they are unguarded.
   */
  readonly seal?: (id: string, options: SealOptions) => Effect.Effect<SealReport, SandboxError>
  /** Unpacks a tar archive at path. */
  readonly put: (id: string, path: string, tar: Uint8Array) => Effect.Effect<void, SandboxError>
  /** A tar archive of path (a file or a directory). */
  readonly get: (id: string, path: string) => Effect.Effect<Uint8Array, SandboxError>
  /** Idempotent: destroying a missing sandbox succeeds. */
  readonly destroy: (id: string) => Effect.Effect<void, SandboxError>
  /** Every sandbox this driver manages (label t1.managed), whoever owns it. */
  readonly list: Effect.Effect<ReadonlyArray<SandboxInfo>, SandboxError>
}

export class SandboxDriver extends Context.Service<SandboxDriver, SandboxDriverShape>()(
  "t1/SandboxDriver",
) {}

export const DEFAULT_PIDS_LIMIT = 256
export const DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024

/** A spec with the defaults a sandbox host uses, and the given fields changed. */
export const sandboxSpec = (overrides: Partial<SandboxSpec> = {}): SandboxSpec => ({
  image: "t1-base:latest",
  cpus: 0,
  memoryMb: 0,
  pidsLimit: DEFAULT_PIDS_LIMIT,
  network: false,
  user: "",
  workdir: "/app",
  env: {},
  labels: {},
  ttlMs: 30 * 60_000,
  ...overrides,
})
