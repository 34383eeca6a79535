import { Data } from "effect"

/** A task directory (or a set of them) could not be read. */
export class TaskReadFailed extends Data.TaggedError("TaskReadFailed")<{
  readonly path: string
  readonly reason: string
}> {
  override get message(): string {
    return `reading tasks from ${this.path} failed: ${this.reason}`
  }
}

/** Some eval task overlaps the train set above the threshold, or the split is not disjoint. */
export class ContaminationFound extends Data.TaggedError("ContaminationFound")<{
  readonly max: number
  readonly threshold: number
  /** Eval task ids above the threshold. */
  readonly flagged: ReadonlyArray<string>
  /** Split violations (see splits.ts checkSplits). */
  readonly violations: ReadonlyArray<string>
}> {
  override get message(): string {
    const parts: Array<string> = []
    if (this.flagged.length > 0)
      parts.push(
        `${this.flagged.length} eval task(s) overlap the train set above ${this.threshold} (max ${this.max.toFixed(3)}): ${this.flagged.join(", ")}`,
      )
    if (this.violations.length > 0)
      parts.push(`${this.violations.length} split violation(s): ${this.violations.join("; ")}`)
    return parts.join("; ")
  }
}
