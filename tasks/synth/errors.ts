import { Data } from "effect"

/** The family named in a synth request is not in the registry. */
export class UnknownFamily extends Data.TaggedError("UnknownFamily")<{
  readonly family: string
  readonly known: ReadonlyArray<string>
}> {
  override get message(): string {
    return `unknown task family ${JSON.stringify(this.family)}; known: ${this.known.join(", ")}`
  }
}

/** A task directory could not be written. */
export class TaskWriteFailed extends Data.TaggedError("TaskWriteFailed")<{
  readonly path: string
  readonly reason: string
}> {
  override get message(): string {
    return `writing ${this.path} failed: ${this.reason}`
  }
}
