export { CappedOutput, truncationMarker } from "./capped-output.ts"
export { FrameScanner, quoteAnsiC } from "./framing.ts"
export type { ShellProcess, StartShell } from "./process.ts"
export {
  INTERRUPTED,
  isSandboxError,
  openShellSession,
  SHELL_DIED,
  type ShellSession,
  type ShellSessionOptions,
} from "./session.ts"
