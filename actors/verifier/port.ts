import { Context, Effect, Layer } from "effect"
import type { ExecResult } from "../../proto/index.ts"
import type {
  SandboxClient,
  SandboxClientError,
  SandboxDriverShape,
  SandboxError,
  SealOptions,
  SealReport,
} from "../sandbox/index.ts"
import { SandboxCallFailed } from "./errors.ts"

/** What one command in the sandbox's shell gave back. */
export interface ShellResult {
  /** stdout and stderr, head and tail kept when over the cap; raw bytes. */
  readonly output: Uint8Array
  readonly exitCode: number
  readonly timedOut: boolean
  readonly truncated: boolean
  /** The shell died during the command (something killed it) and a fresh one was started. */
  readonly sessionRestarted: boolean
}

/**
 * The verifier's view of one sandbox: its shell and a way to unpack files into it. A
 * SandboxDriver backs it in-process (library use, tests, `t1 tasks check`); the sandbox client
 * backs it over the bus (the verifier actor, whose sandboxes' shells live in a sandbox host).
 * Files are read back through the shell (see files.ts), which works the same through both.
 */
export interface VerifierSandboxShape {
  readonly exec: (
    command: string,
    options: { readonly timeoutMs: number; readonly maxOutputBytes: number },
  ) => Effect.Effect<ShellResult, SandboxCallFailed>
  /**
   * `argv` as a process of its own, outside the agent's shell (the guarded path, guard.ts);
   * absent where the sandbox cannot.
   */
  readonly execArgv?: (
    argv: ReadonlyArray<string>,
    options: { readonly timeoutMs: number; readonly maxOutputBytes: number },
  ) => Effect.Effect<ShellResult, SandboxCallFailed>
  /**
   * How the verifier's scripts run when not in a fresh shell of the agent's session (`guard`
   * sets it to the toolchain's bash).
   */
  readonly script?: (
    script: string,
    options: { readonly timeoutMs: number; readonly maxOutputBytes: number },
  ) => Effect.Effect<ShellResult, SandboxCallFailed>
  /**
   * Stops every process of the agent from outside the sandbox and puts the image's files back
   * under the given paths (SandboxDriverShape.seal); absent, or answering undefined (a sandbox
   * host whose driver cannot), where the sandbox cannot, and then the verification is unguarded.
   */
  readonly seal?: (options: SealOptions) => Effect.Effect<SealReport | undefined, SandboxCallFailed>
  /** Unpacks a tar archive at path (made when missing). */
  readonly put: (path: string, tar: Uint8Array) => Effect.Effect<void, SandboxCallFailed>
  /** Largest archive one put may carry; bigger uploads are sent in pieces. */
  readonly maxPutBytes: number
}

const fromDriverError =
  (operation: SandboxCallFailed["operation"]) =>
  (e: SandboxError): SandboxCallFailed =>
    new SandboxCallFailed({
      operation,
      reason: e.message,
      // A sandbox that no longer exists after its episode was lost under us: that is infra.
      infra: e.errorClass === "infra" || e._tag === "SandboxNotFound",
    })

/** The sandbox `id` of an in-process driver. */
export const driverSandbox = (driver: SandboxDriverShape, id: string): VerifierSandboxShape => {
  const execArgv = driver.execArgv
  const seal = driver.seal
  return {
    ...(seal === undefined
      ? {}
      : {
          seal: (options: SealOptions) =>
            seal(id, options).pipe(Effect.mapError(fromDriverError("seal"))),
        }),
    exec: (command, options) =>
      driver.exec(id, command, options).pipe(Effect.mapError(fromDriverError("exec"))),
    ...(execArgv === undefined
      ? {}
      : {
          execArgv: (argv, options) =>
            execArgv(id, argv, options).pipe(Effect.mapError(fromDriverError("exec"))),
        }),
    put: (path, tar) => driver.put(id, path, tar).pipe(Effect.mapError(fromDriverError("put"))),
    maxPutBytes: Number.POSITIVE_INFINITY,
  }
}

const fromClientError =
  (operation: SandboxCallFailed["operation"]) =>
  (e: SandboxClientError): SandboxCallFailed =>
    new SandboxCallFailed({
      operation,
      reason: e.message,
      // Only an answer of the host saying "not retryable" is the sandbox refusing; everything
      // else (bus errors, vanished sandboxes, undecodable replies) is the machinery.
      infra: e._tag === "SandboxRequestFailed" ? e.retryable : true,
    })

/** Headroom under the bus max_payload for the rest of a put request. */
const PUT_HEADROOM = 16 * 1024

/** What the verifier reads of an exec answer from a sandbox host. */
const shellResultOf = (r: ExecResult): ShellResult => ({
  output: r.output,
  exitCode: r.exitCode,
  timedOut: r.timedOut,
  truncated: r.truncated,
  sessionRestarted: r.sessionRestarted,
})

/** The sandbox `id` on a sandbox host, over the bus. */
export const clientSandbox = (
  client: SandboxClient,
  id: string,
  maxPayload: number,
): VerifierSandboxShape => ({
  // A failed exec (sandbox died, engine gone) arrives as an error the client raises.
  exec: (command, options) =>
    client
      .exec(id, command, options)
      .pipe(Effect.map(shellResultOf), Effect.mapError(fromClientError("exec"))),
  execArgv: (argv, options) =>
    client
      .execArgv(id, argv, options)
      .pipe(Effect.map(shellResultOf), Effect.mapError(fromClientError("exec"))),
  seal: (options) => client.seal(id, options).pipe(Effect.mapError(fromClientError("seal"))),
  put: (path, tar) =>
    client.put(id, path, tar).pipe(Effect.asVoid, Effect.mapError(fromClientError("put"))),
  maxPutBytes: Math.max(64 * 1024, maxPayload - PUT_HEADROOM),
})

/**
 * The sandbox a verification runs in, as a service: `verifyEpisode` reads it from its context,
 * so the same verification runs in-process on a driver (library use, tests, `t1 tasks check`)
 * or over the bus on a sandbox host (the verifier actor) by the layer it is given.
 */
export class VerifierSandbox extends Context.Service<VerifierSandbox, VerifierSandboxShape>()(
  "t1/VerifierSandbox",
) {}

/** The sandbox `id` of an in-process driver, as a layer. */
export const driverSandboxLayer = (driver: SandboxDriverShape, id: string) =>
  Layer.succeed(VerifierSandbox, driverSandbox(driver, id))

/** The sandbox `id` on a sandbox host over the bus, as a layer. */
export const clientSandboxLayer = (client: SandboxClient, id: string, maxPayload: number) =>
  Layer.succeed(VerifierSandbox, clientSandbox(client, id, maxPayload))
