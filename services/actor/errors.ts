import { Data } from "effect"

/** A message that is not what its subject promises: undecodable bytes, a wrong shape. */
export class MalformedMessage extends Data.TaggedError("MalformedMessage")<{
  /** Short, stable category for metrics and log-once: "protobuf", "shape", "range"… */
  readonly kind: string
  readonly reason: string
}> {
  override get message(): string {
    return `malformed message (${this.kind}): ${this.reason}`
  }
}
