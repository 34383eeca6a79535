import { Data } from "effect"
import type { ErrorClass } from "../sandbox/index.ts"

/**
 * A sandbox operation the verifier asked for failed. `infra`: the machinery failed (sandbox
 * gone, engine down, bus timeout); otherwise the sandbox refused (e.g. a path the driver cannot
 * transfer to).
 */
export class SandboxCallFailed extends Data.TaggedError("SandboxCallFailed")<{
  readonly operation: "exec" | "put" | "seal"
  readonly reason: string
  readonly infra: boolean
}> {
  override get message(): string {
    return `sandbox ${this.operation} failed: ${this.reason}`
  }
}

/**
 * The verification could not be carried out because of the machinery, not the agent's work:
 * the episode is retried (when `retryable`) or excluded, never scored as reward 0.
 */
export class VerifierInfraError extends Data.TaggedError("VerifierInfraError")<{
  /** What the verifier was doing: "prepare", "upload", "run", "read-report"… */
  readonly stage: string
  readonly reason: string
  readonly retryable: boolean
}> {
  readonly errorClass: ErrorClass = "infra"
  override get message(): string {
    return `verification failed while ${this.stage}: ${this.reason}`
  }
}

/** The task (or the request carrying it) cannot be verified as given: never retryable. */
export class InvalidVerifierTask extends Data.TaggedError("InvalidVerifierTask")<{
  /** The offending field, e.g. "verifier.testsDir" or "task.test_files". */
  readonly field: string
  readonly reason: string
}> {
  override get message(): string {
    return `invalid task for the verifier: ${this.field}: ${this.reason}`
  }
}

export type VerifierError = VerifierInfraError | InvalidVerifierTask
