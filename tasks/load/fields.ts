import { posix } from "node:path"
import { Effect } from "effect"
import { TaskLoadError } from "./errors.ts"

/** How a config file's fields are named in messages: `[agent].timeout_sec` or `services.client`. */
export type ConfigSyntax = "toml" | "yaml" | "json"

const TABLE_WORD: Record<ConfigSyntax, string> = {
  toml: "a table",
  yaml: "a mapping",
  json: "an object",
}

const TABLES_WORD: Record<ConfigSyntax, string> = {
  toml: "a list of tables",
  yaml: "a list of mappings",
  json: "a list of objects",
}

const SIZE = /^\s*(\d+(?:\.\d+)?)\s*([kmgt])(?:i?b)?\s*$/i
const UNIT_MB: Readonly<Record<string, number>> = { k: 1 / 1024, m: 1, g: 1024, t: 1024 * 1024 }

const clip = (text: string, max = 60): string =>
  text.length <= max ? text : `${text.slice(0, max - 1)}…`

/** A value as a message shows it after "got". */
export const describeValue = (value: unknown, syntax: ConfigSyntax = "json"): string => {
  if (value === undefined) return "nothing"
  if (value === null) return "null"
  if (value instanceof Date) return `a date (${clip(value.toISOString())})`
  if (typeof value === "string") return clip(JSON.stringify(value))
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint")
    return String(value)
  if (Array.isArray(value)) return `a list ${clip(JSON.stringify(value) ?? "[]")}`
  return TABLE_WORD[syntax]
}

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date)

/**
 * One table of a config file (a TOML table, a YAML mapping, a JSON object) with typed readers.
 * A reader gives undefined when the key is absent and fails, naming file and field, when the
 * value has the wrong type; defaults are the caller's (`?? 360`).
 */
export class ConfigTable {
  private constructor(
    readonly file: string,
    readonly syntax: ConfigSyntax,
    private readonly path: ReadonlyArray<string>,
    readonly values: Readonly<Record<string, unknown>>,
  ) {}

  /** The document's root, which must be a table. */
  static root(
    file: string,
    syntax: ConfigSyntax,
    document: unknown,
  ): Effect.Effect<ConfigTable, TaskLoadError> {
    if (isRecord(document)) return Effect.succeed(new ConfigTable(file, syntax, [], document))
    return Effect.fail(
      new TaskLoadError({
        file,
        expected: `${TABLE_WORD[syntax]} of task settings at the top`,
        got: describeValue(document, syntax),
      }),
    )
  }

  /** The field's name as the message shows it. */
  name(key: string): string {
    if (this.syntax === "toml" && this.path.length > 0) return `[${this.path.join(".")}].${key}`
    return [...this.path, key].join(".").replace(/\.\[/g, "[")
  }

  has(key: string): boolean {
    return this.values[key] !== undefined
  }

  /** The error for this field; `got` defaults to a description of the value there. */
  error(
    key: string,
    expected: string,
    got: string = describeValue(this.values[key], this.syntax),
  ): TaskLoadError {
    return new TaskLoadError({ file: this.file, field: this.name(key), expected, got })
  }

  /** The value at `key` when `accept` takes it; a wrong one fails with `expected`. */
  read<A>(
    key: string,
    expected: string,
    accept: (value: unknown) => A | undefined,
  ): Effect.Effect<A | undefined, TaskLoadError> {
    const value = this.values[key]
    if (value === undefined) return Effect.succeed(undefined)
    const accepted = accept(value)
    return accepted === undefined
      ? Effect.fail(this.error(key, expected))
      : Effect.succeed(accepted)
  }

  /** Fails naming the field when it is absent. */
  required<A>(
    key: string,
    expected: string,
    read: Effect.Effect<A | undefined, TaskLoadError>,
  ): Effect.Effect<A, TaskLoadError> {
    return Effect.flatMap(read, (value) =>
      value === undefined ? Effect.fail(this.error(key, expected)) : Effect.succeed(value),
    )
  }

  table(key: string): Effect.Effect<ConfigTable | undefined, TaskLoadError> {
    return this.read(key, TABLE_WORD[this.syntax], (value) =>
      isRecord(value)
        ? new ConfigTable(this.file, this.syntax, [...this.path, key], value)
        : undefined,
    )
  }

  /** A table that may be absent: then an empty one, so its readers all give undefined. */
  section(key: string): Effect.Effect<ConfigTable, TaskLoadError> {
    return Effect.map(
      this.table(key),
      (table) => table ?? new ConfigTable(this.file, this.syntax, [...this.path, key], {}),
    )
  }

  /** A list of tables: `descriptions[0]`, `descriptions[1]`… */
  tables(key: string): Effect.Effect<ReadonlyArray<ConfigTable> | undefined, TaskLoadError> {
    const value = this.values[key]
    if (value === undefined) return Effect.succeed(undefined)
    if (!Array.isArray(value)) return Effect.fail(this.error(key, TABLES_WORD[this.syntax]))
    return Effect.forEach(value, (item: unknown, index) => ConfigTable.item(this, key, index, item))
  }

  /** One element of a list of tables, or of a document that is a list (solution.yaml). */
  static item(
    parent: ConfigTable | { readonly file: string; readonly syntax: ConfigSyntax },
    key: string,
    index: number,
    item: unknown,
  ): Effect.Effect<ConfigTable, TaskLoadError> {
    const path =
      parent instanceof ConfigTable ? [...parent.path, `${key}[${index}]`] : [`[${index}]`]
    if (isRecord(item))
      return Effect.succeed(new ConfigTable(parent.file, parent.syntax, path, item))
    return Effect.fail(
      new TaskLoadError({
        file: parent.file,
        field: path.join(".").replace(/\.\[/g, "["),
        expected: TABLE_WORD[parent.syntax],
        got: describeValue(item, parent.syntax),
      }),
    )
  }

  string(key: string): Effect.Effect<string | undefined, TaskLoadError> {
    return this.read(key, "a string", (v) => (typeof v === "string" ? v : undefined))
  }

  nonEmptyString(key: string): Effect.Effect<string | undefined, TaskLoadError> {
    return this.read(key, "a non-empty string", (v) =>
      typeof v === "string" && v.trim() !== "" ? v : undefined,
    )
  }

  boolean(key: string): Effect.Effect<boolean | undefined, TaskLoadError> {
    return this.read(key, "true or false", (v) => (typeof v === "boolean" ? v : undefined))
  }

  /** A number > 0 (integer: a whole one); a string holding one is not a number. */
  positiveNumber(
    key: string,
    options: { readonly integer?: boolean } = {},
  ): Effect.Effect<number | undefined, TaskLoadError> {
    const expected = options.integer === true ? "a positive integer" : "a positive number"
    return this.read(key, expected, (v) =>
      typeof v === "number" &&
      Number.isFinite(v) &&
      v > 0 &&
      (options.integer !== true || Number.isInteger(v))
        ? v
        : undefined,
    )
  }

  nonNegativeInteger(key: string): Effect.Effect<number | undefined, TaskLoadError> {
    return this.read(key, "an integer >= 0", (v) =>
      typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : undefined,
    )
  }

  strings(key: string): Effect.Effect<ReadonlyArray<string> | undefined, TaskLoadError> {
    return this.read(key, "a list of strings", (v) =>
      Array.isArray(v) && v.every((item) => typeof item === "string")
        ? (v as ReadonlyArray<string>)
        : undefined,
    )
  }

  oneOf<const A extends string>(
    key: string,
    choices: ReadonlyArray<A>,
  ): Effect.Effect<A | undefined, TaskLoadError> {
    const expected = `one of ${choices.map((c) => JSON.stringify(c)).join(", ")}`
    return this.read(key, expected, (v) => choices.find((choice) => choice === v))
  }

  /**
   * A size in MiB (rounded down): "2G", "512M", "1.5g", "100K", with an optional B/iB. A bare
   * number is bytes where `bareNumber` says so (Compose's mem_limit), else it is refused.
   */
  sizeMb(
    key: string,
    bareNumber: "bytes" | "refused" = "refused",
  ): Effect.Effect<number | undefined, TaskLoadError> {
    const expected = `a size like "2G" or "512M"${bareNumber === "bytes" ? " (or bytes)" : ""}`
    return this.read(key, expected, (v) => {
      const bytes =
        bareNumber === "bytes" && (typeof v === "number" || /^\s*\d+\s*$/.test(String(v)))
          ? Number(v)
          : undefined
      if (bytes !== undefined)
        return bytes >= 1024 * 1024 ? Math.floor(bytes / 1024 / 1024) : undefined
      const match = typeof v === "string" ? SIZE.exec(v) : null
      if (match === null) return undefined
      const mb = Math.floor(Number(match[1]) * (UNIT_MB[(match[2] ?? "").toLowerCase()] ?? 0))
      return mb > 0 ? mb : undefined
    })
  }

  /** An absolute POSIX path, normalised (`/app/` → `/app`). */
  absolutePath(key: string): Effect.Effect<string | undefined, TaskLoadError> {
    return this.read(key, "an absolute path", (v) =>
      typeof v === "string" && v.startsWith("/") && !v.includes("\0")
        ? posix.normalize(v).replace(/(.)\/$/, "$1")
        : undefined,
    )
  }

  /** Fails on the first key that is not in `known` (native task.json has no extensions). */
  rejectUnknown(known: ReadonlyArray<string>): Effect.Effect<void, TaskLoadError> {
    const unknown = Object.keys(this.values).find((key) => !known.includes(key))
    if (unknown === undefined) return Effect.void
    return Effect.fail(
      new TaskLoadError({
        file: this.file,
        field: this.name(unknown),
        expected: `a known field (${known.join(", ")})`,
        got: "an unknown field",
      }),
    )
  }
}
