import { Data } from "effect"

/**
 * infra: the machinery failed (engine down, container died); the episode is retried or excluded,
 * never scored. task: the input or the agent's command is at fault; it is part of the episode.
 */
export type ErrorClass = "infra" | "task"

export class EngineUnavailable extends Data.TaggedError("EngineUnavailable")<{
  readonly engine: string
  readonly reason: string
}> {
  readonly errorClass: ErrorClass = "infra"
  override get message(): string {
    return `sandbox engine ${this.engine} is unavailable: ${this.reason}`
  }
}

export class ImageNotFound extends Data.TaggedError("ImageNotFound")<{ readonly image: string }> {
  readonly errorClass: ErrorClass = "task"
  override get message(): string {
    return `image ${this.image} is not present on the engine (build it with t1 image build-base or t1 image build)`
  }
}

export class InvalidSandboxSpec extends Data.TaggedError("InvalidSandboxSpec")<{
  readonly field: string
  readonly reason: string
}> {
  readonly errorClass: ErrorClass = "task"
  override get message(): string {
    return `invalid sandbox spec: ${this.field}: ${this.reason}`
  }
}

export class InvalidCommand extends Data.TaggedError("InvalidCommand")<{
  readonly reason: string
}> {
  readonly errorClass: ErrorClass = "task"
  override get message(): string {
    return `invalid command: ${this.reason}`
  }
}

export class SandboxNotFound extends Data.TaggedError("SandboxNotFound")<{ readonly id: string }> {
  readonly errorClass: ErrorClass = "task"
  override get message(): string {
    return `sandbox ${this.id} does not exist (destroyed, reaped or never created)`
  }
}

/** The sandbox stopped existing under us: killed from outside, OOM-killed, engine restarted. */
export class SandboxDied extends Data.TaggedError("SandboxDied")<{
  readonly id: string
  readonly reason: string
}> {
  readonly errorClass: ErrorClass = "infra"
  override get message(): string {
    return `sandbox ${this.id} died: ${this.reason}`
  }
}

/** Any other failure of the driver or engine (an API error, a broken stream). */
export class SandboxInfraError extends Data.TaggedError("SandboxInfraError")<{
  readonly operation: string
  readonly reason: string
}> {
  readonly errorClass: ErrorClass = "infra"
  override get message(): string {
    return `${this.operation} failed: ${this.reason}`
  }
}

export class FileTransferError extends Data.TaggedError("FileTransferError")<{
  readonly path: string
  readonly reason: string
}> {
  readonly errorClass: ErrorClass = "task"
  override get message(): string {
    return `file transfer at ${this.path} failed: ${this.reason}`
  }
}

export type SandboxError =
  | EngineUnavailable
  | ImageNotFound
  | InvalidSandboxSpec
  | InvalidCommand
  | SandboxNotFound
  | SandboxDied
  | SandboxInfraError
  | FileTransferError
