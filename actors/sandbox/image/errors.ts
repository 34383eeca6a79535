import { Data } from "effect"

/** The base image could not be made: debootstrap, the rootfs archive or the import failed. */
export class BaseImageBuildFailed extends Data.TaggedError("BaseImageBuildFailed")<{
  readonly stage: "prerequisites" | "debootstrap" | "archive" | "import" | "engine" | "toolchain"
  readonly reason: string
}> {
  override get message(): string {
    return `building the base image failed at ${this.stage}: ${this.reason}`
  }
}

/** The task directory has no Dockerfile where one is expected, or it cannot be read. */
export class TaskContextInvalid extends Data.TaggedError("TaskContextInvalid")<{
  readonly taskDir: string
  readonly reason: string
}> {
  override get message(): string {
    return `task ${this.taskDir}: ${this.reason}`
  }
}

/** A Dockerfile step that an offline build cannot run, found before (or by) the build. */
export class UnsupportedStep extends Data.TaggedError("UnsupportedStep")<{
  readonly dockerfile: string
  readonly line: number
  readonly step: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.dockerfile}:${this.line}: ${this.step}: ${this.reason}`
  }
}

/**
 * The engine ran the build and a step failed; `output` holds the failing step's last lines (at
 * most 20). The message names the Dockerfile line, the instruction and the network the RUN
 * steps had, then that output.
 */
export class ImageBuildFailed extends Data.TaggedError("ImageBuildFailed")<{
  readonly image: string
  readonly dockerfile: string
  /** The RUN steps' network; absent when not told. */
  readonly network?: "none" | "default"
  /** 0 when the failing step could not be told. */
  readonly line: number
  readonly step: string
  readonly reason: string
  readonly output: string
}> {
  override get message(): string {
    const where = this.line > 0 ? `${this.dockerfile}:${this.line}` : this.dockerfile
    const network = this.network === undefined ? "" : ` (network: ${this.network})`
    const output =
      this.output === "" ? "" : `\n--- output of the step (last lines) ---\n${this.output}`
    return `building ${this.image}${network} failed at ${where}: ${this.step}: ${this.reason}${output}`
  }
}

export type ImageError =
  | BaseImageBuildFailed
  | TaskContextInvalid
  | UnsupportedStep
  | ImageBuildFailed
