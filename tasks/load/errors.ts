import { Data } from "effect"

/**
 * A task directory that cannot be loaded. The message names the file, the field (when one is at
 * fault) and what was expected, e.g.
 * `tasks/x/task.toml: [agent].timeout_sec: expected a positive number, got "soon"`.
 */
export class TaskLoadError extends Data.TaggedError("TaskLoadError")<{
  /** The file or directory at fault, as the caller spelled the task directory. */
  readonly file: string
  /** `[agent].timeout_sec` (TOML), `services.client.build` (YAML), `cpus` (JSON). */
  readonly field?: string | undefined
  readonly expected: string
  /** What was there instead: a quoted value, "nothing", or the parser's complaint. */
  readonly got?: string | undefined
}> {
  override get message(): string {
    const field = this.field === undefined ? "" : `${this.field}: `
    const got = this.got === undefined ? "" : `, got ${this.got}`
    return `${this.file}: ${field}expected ${this.expected}${got}`
  }
}

/** Every task that failed in one `loadTasks` call, one line each in the message. */
export class TaskLoadErrors extends Data.TaggedError("TaskLoadErrors")<{
  readonly errors: ReadonlyArray<TaskLoadError>
}> {
  override get message(): string {
    const n = this.errors.length
    const lines = this.errors.map((error) => `  ${error.message}`)
    return [`${n} task${n === 1 ? "" : "s"} failed to load:`, ...lines].join("\n")
  }
}
