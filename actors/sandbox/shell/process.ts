/**
 * A started shell process, whatever runs it (a local child process, a docker exec). The session
 * (session.ts) speaks to bash through this and nothing else, so both drivers share the framing,
 * timeouts, output caps and restarts.
 */
export interface ShellProcess {
  /** Writes to bash's stdin. */
  readonly write: (data: Uint8Array) => Promise<void>
  /** Called with each piece of bash's stdout, in order. */
  readonly onOutput: (listener: (chunk: Uint8Array) => void) => void
  /** Called once when the process is gone (stdout ended / exited), with a reason. */
  readonly onExit: (listener: (reason: string) => void) => void
  /**
   * Sends a signal to a process group inside the sandbox (the session's bash leads its own
   * group: it was started through setsid).
   */
  readonly signal: (pgid: number, signal: "INT" | "KILL") => Promise<void>
  /** Ends the process and frees its resources; idempotent. */
  readonly close: () => Promise<void>
}

/**
 * Starts `setsid bash --noprofile --norc` (no prompt, no job control) with the sandbox's
 * workdir, user and environment, stdin/stdout as pipes, stderr merged into stdout or discarded.
 */
export type StartShell = () => Promise<ShellProcess>
