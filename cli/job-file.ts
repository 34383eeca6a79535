/**
 * Job files: a t1.v1.JobSpec written as YAML or JSON, with the proto field names (snake_case) as
 * keys, as `t1 submit` reads them:
 *
 *   name: nightly-eval
 *   kind: eval                      # train | eval | rollout | sft (or JOB_KIND_EVAL)
 *   task_set: tasks/bundled/eval
 *   samples_per_task: 4
 *   limits: { max_turns: 30, wall_clock_sec: 10m }
 *
 * The conversion is driven by the JobSpec descriptor, so a field added to job.proto is accepted
 * without a change here. Every problem is reported at once, each with its file position and its
 * proto field path (`spec.learner.clip_eps`, `spec.task_ids[2]`): unknown keys (with the closest
 * known key), wrong types, unknown enum names, integers out of their type's range and malformed
 * durations; then the gateway's own validation (validateJobSpec) runs on the result, so a file
 * this accepts is one the gateway accepts, and one it refuses gets the gateway's messages.
 */
import { createHash } from "node:crypto"
import { extname } from "node:path"
import {
  type DescEnum,
  type DescField,
  type DescMessage,
  type DescOneof,
  fromJson,
  type JsonObject,
  type JsonValue,
  ScalarType,
  toJson,
} from "@bufbuild/protobuf"
import { Data } from "effect"
import { type Document, isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument } from "yaml"
import { type JobSpec, JobSpecSchema } from "../proto/index.ts"
import { validateJobSpec } from "../services/gateway/validate.ts"

/** One problem with a job file; `fieldPath` is empty for syntax errors. Lines are 1-based. */
export interface JobFileProblem {
  readonly fieldPath: string
  readonly reason: string
  readonly line?: number
  readonly col?: number
}

export const formatProblem = (file: string, p: JobFileProblem): string =>
  `${file}${p.line === undefined ? "" : `:${p.line}:${p.col ?? 1}`}: ${
    p.fieldPath === "" ? "" : `${p.fieldPath}: `
  }${p.reason}`

/** A job file that does not describe a valid JobSpec: every problem, in file order. */
export class JobFileError extends Data.TaggedError("JobFileError")<{
  readonly file: string
  readonly problems: ReadonlyArray<JobFileProblem>
}> {
  override get message(): string {
    const lines = this.problems.map((p) => formatProblem(this.file, p))
    if (lines.length === 1) return `invalid job file: ${lines[0]}`
    return `invalid job file ${this.file} (${lines.length} problems):\n${lines.map((l) => `  ${l}`).join("\n")}`
  }
}

export type JobFileFormat = "json" | "yaml"

/** `.json` is JSON, `.yaml`/`.yml` YAML; otherwise JSON when the text starts with `{`. */
export const detectFormat = (file: string, text: string): JobFileFormat => {
  const ext = extname(file).toLowerCase()
  if (ext === ".json") return "json"
  if (ext === ".yaml" || ext === ".yml") return "yaml"
  return text.trimStart().startsWith("{") ? "json" : "yaml"
}

export interface ParsedJobFile {
  readonly format: JobFileFormat
  /** The spec as far as it could be converted; meaningful only when `problems` is empty. */
  readonly spec: JobSpec
  readonly problems: ReadonlyArray<JobFileProblem>
}

// ---- helpers ----------------------------------------------------------------------------------

const levenshtein = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      current.push(
        Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost),
      )
    }
    previous = current
  }
  return previous[b.length] ?? 0
}

/** The candidate closest to `word`, when one is close enough to be a likely typo. */
export const closest = (word: string, candidates: ReadonlyArray<string>): string | undefined => {
  const squash = (s: string) => s.toLowerCase().replace(/[_\-\s]/g, "")
  const w = squash(word)
  const same = candidates.find((c) => squash(c) === w)
  if (same !== undefined) return same
  let best: string | undefined
  let bestDistance = Number.POSITIVE_INFINITY
  for (const c of candidates) {
    const d = levenshtein(w, squash(c))
    if (d < bestDistance) {
      best = c
      bestDistance = d
    }
  }
  if (best !== undefined && bestDistance <= Math.max(1, Math.floor(w.length / 3))) return best
  if (w.length >= 3)
    return candidates.find((c) => w.startsWith(squash(c)) || squash(c).startsWith(w))
  return undefined
}

const describe = (value: unknown): string => {
  if (value === null || value === undefined) return "nothing"
  if (typeof value === "string") return `string ${JSON.stringify(value)}`
  if (typeof value === "bigint" || typeof value === "number") return `number ${value}`
  if (typeof value === "boolean") return `${value}`
  return typeof value
}

const INT_RANGES: Partial<Record<ScalarType, readonly [bigint, bigint]>> = {
  [ScalarType.INT32]: [-(2n ** 31n), 2n ** 31n - 1n],
  [ScalarType.SINT32]: [-(2n ** 31n), 2n ** 31n - 1n],
  [ScalarType.SFIXED32]: [-(2n ** 31n), 2n ** 31n - 1n],
  [ScalarType.UINT32]: [0n, 2n ** 32n - 1n],
  [ScalarType.FIXED32]: [0n, 2n ** 32n - 1n],
  [ScalarType.INT64]: [-(2n ** 63n), 2n ** 63n - 1n],
  [ScalarType.SINT64]: [-(2n ** 63n), 2n ** 63n - 1n],
  [ScalarType.SFIXED64]: [-(2n ** 63n), 2n ** 63n - 1n],
  [ScalarType.UINT64]: [0n, 2n ** 64n - 1n],
  [ScalarType.FIXED64]: [0n, 2n ** 64n - 1n],
}
const IS_64_BIT = new Set([
  ScalarType.INT64,
  ScalarType.SINT64,
  ScalarType.SFIXED64,
  ScalarType.UINT64,
  ScalarType.FIXED64,
])

const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }
const DURATION = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$/

/** `90s`, `10m`, `1h30m`, `250ms` in milliseconds; undefined when malformed. */
export const parseDuration = (text: string): number | undefined => {
  const compact = text.replace(/\s+/g, "")
  if (!DURATION.test(compact)) return undefined
  let ms = 0
  for (const [, amount, unit] of compact.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) {
    ms += Number(amount) * (DURATION_UNITS_MS[unit ?? ""] ?? Number.NaN)
  }
  return Math.round(ms * 1000) / 1000
}

/** Fields named `*_ms` or `*_sec` (common.proto's convention) also take a duration string. */
const durationUnit = (
  field: DescField,
): { readonly name: string; readonly ms: number } | undefined =>
  field.name.endsWith("_ms")
    ? { name: "milliseconds", ms: 1 }
    : field.name.endsWith("_sec")
      ? { name: "seconds", ms: 1000 }
      : undefined

/** The names a job file may use for an enum's values: `train` for JOB_KIND_TRAIN. */
export const enumChoices = (e: DescEnum): string[] =>
  e.values.filter((v) => v.number !== 0).map((v) => v.localName.toLowerCase())

// ---- conversion -------------------------------------------------------------------------------

type YamlNode = unknown

interface Position {
  readonly offset: number
  readonly line: number
  readonly col: number
}

interface Located extends JobFileProblem {
  readonly offset?: number
}

class Converter {
  readonly problems: Located[] = []
  /** Paths already reported, or named as the likely intent of an unknown key. */
  readonly covered = new Set<string>()

  constructor(
    readonly doc: Document.Parsed,
    readonly lines: LineCounter,
  ) {}

  position(node: YamlNode): Position | undefined {
    const range =
      typeof node === "object" && node !== null && "range" in node ? node.range : undefined
    if (!Array.isArray(range) || typeof range[0] !== "number") return undefined
    const { line, col } = this.lines.linePos(range[0])
    return { offset: range[0], line, col }
  }

  add(fieldPath: string, reason: string, node: YamlNode): void {
    this.covered.add(fieldPath)
    const at = this.position(node)
    this.problems.push(at === undefined ? { fieldPath, reason } : { fieldPath, reason, ...at })
  }

  resolve(node: YamlNode): YamlNode {
    return isAlias(node) ? node.resolve(this.doc) : node
  }

  message(desc: DescMessage, raw: YamlNode, path: string): JsonObject {
    const node = this.resolve(raw)
    const out: JsonObject = {}
    if (node === null || (isScalar(node) && node.value === null)) return out
    const names = desc.fields.map((f) => f.name)
    if (!isMap(node)) {
      this.add(
        path,
        `must be a mapping of ${desc.name} fields (${names.join(", ")}), got ${this.kindOf(node)}`,
        node,
      )
      return out
    }
    const oneofs = new Map<DescOneof, string>()
    for (const pair of node.items) {
      const keyNode = this.resolve(pair.key)
      const key = isScalar(keyNode) ? keyNode.value : undefined
      if (typeof key !== "string") {
        this.add(path, `keys must be field names, got ${this.kindOf(keyNode)}`, keyNode)
        continue
      }
      const field = desc.fields.find((f) => f.name === key)
      const fieldPath = `${path}.${key}`
      if (field === undefined) {
        const guess = closest(key, names)
        if (guess !== undefined) this.covered.add(`${path}.${guess}`)
        const camel = desc.fields.find((f) => f.jsonName === key && f.jsonName !== f.name)
        this.add(
          fieldPath,
          guess === undefined
            ? `unknown field; ${desc.name} has ${names.join(", ")}`
            : `unknown field; did you mean ${guess}?${camel === undefined ? "" : " (job files use the proto field names)"}`,
          keyNode,
        )
        continue
      }
      const valueNode = this.resolve(pair.value)
      const empty =
        valueNode === null ||
        valueNode === undefined ||
        (isScalar(valueNode) && valueNode.value === null)
      const value = this.field(field, empty ? keyNode : valueNode, fieldPath, empty)
      if (value === undefined) continue
      if (field.oneof !== undefined) {
        const other = oneofs.get(field.oneof)
        if (other !== undefined) {
          this.add(fieldPath, `only one of ${other} and ${key} may be set`, keyNode)
          continue
        }
        oneofs.set(field.oneof, key)
      }
      out[field.name] = value
    }
    return out
  }

  kindOf(node: YamlNode): string {
    if (isMap(node)) return "a mapping"
    if (isSeq(node)) return "a list"
    if (isScalar(node)) return describe(node.value)
    return "nothing"
  }

  /** A field's JSON value, or undefined when it is absent or wrong (then reported). */
  field(field: DescField, node: YamlNode, path: string, empty: boolean): JsonValue | undefined {
    switch (field.fieldKind) {
      case "message":
        return this.message(field.message, empty ? null : node, path)
      case "scalar":
        return empty ? undefined : this.scalar(field.scalar, node, path, durationUnit(field))
      case "enum":
        return empty ? undefined : this.enumValue(field.enum, node, path)
      case "list": {
        if (empty) return undefined
        if (!isSeq(node)) {
          this.add(path, `must be a list, got ${this.kindOf(node)}`, node)
          return undefined
        }
        const items: JsonValue[] = []
        const before = this.problems.length
        node.items.forEach((raw, i) => {
          const item = this.resolve(raw)
          const itemPath = `${path}[${i}]`
          const value =
            field.listKind === "message"
              ? this.message(field.message, item, itemPath)
              : field.listKind === "enum"
                ? this.enumValue(field.enum, item, itemPath)
                : this.scalar(field.scalar, item, itemPath, undefined)
          if (value !== undefined) items.push(value)
        })
        // Dropped items shift the indexes validateJobSpec would name: leave the list to them.
        if (this.problems.length > before) this.covered.add(path)
        return items
      }
      case "map": {
        if (empty) return undefined
        if (!isMap(node)) {
          this.add(path, `must be a mapping, got ${this.kindOf(node)}`, node)
          return undefined
        }
        const entries: JsonObject = {}
        for (const pair of node.items) {
          const keyNode = this.resolve(pair.key)
          const rawKey = isScalar(keyNode) ? keyNode.value : undefined
          const key =
            typeof rawKey === "string" ||
            typeof rawKey === "number" ||
            typeof rawKey === "bigint" ||
            typeof rawKey === "boolean"
              ? String(rawKey)
              : undefined
          if (key === undefined) {
            this.add(path, `keys must be scalars, got ${this.kindOf(keyNode)}`, keyNode)
            continue
          }
          const entryPath = `${path}[${JSON.stringify(key)}]`
          if (field.mapKey === ScalarType.STRING && typeof rawKey !== "string") {
            this.add(entryPath, `key must be a string (quote it: "${key}")`, keyNode)
            continue
          }
          if (field.mapKey !== ScalarType.STRING && field.mapKey !== ScalarType.BOOL) {
            if (this.scalar(field.mapKey, keyNode, entryPath, undefined) === undefined) continue
          }
          const valueNode = this.resolve(pair.value)
          const value =
            field.mapKind === "message"
              ? this.message(field.message, valueNode, entryPath)
              : field.mapKind === "enum"
                ? this.enumValue(field.enum, valueNode ?? keyNode, entryPath)
                : this.scalar(field.scalar, valueNode ?? keyNode, entryPath, undefined)
          if (value !== undefined) entries[key] = value
        }
        return entries
      }
    }
  }

  enumValue(e: DescEnum, node: YamlNode, path: string): JsonValue | undefined {
    const value = isScalar(node) ? node.value : undefined
    const choices = enumChoices(e)
    if (typeof value === "string") {
      const lower = value.toLowerCase()
      const hit = e.values.find(
        (v) =>
          v.number !== 0 && (v.localName.toLowerCase() === lower || v.name.toLowerCase() === lower),
      )
      if (hit !== undefined) return hit.name
    }
    const guess = typeof value === "string" ? closest(value, choices) : undefined
    const zero = e.values.find((v) => v.number === 0)
    const leaveOut =
      typeof value === "string" &&
      zero !== undefined &&
      (value.toLowerCase() === zero.localName.toLowerCase() ||
        value.toLowerCase() === zero.name.toLowerCase())
        ? " (leave the key out for the default)"
        : ""
    this.add(
      path,
      `must be one of ${choices.join(", ")}, got ${this.kindOf(node)}${
        guess === undefined || leaveOut !== "" ? "" : ` (did you mean ${guess}?)`
      }${leaveOut}`,
      node,
    )
    return undefined
  }

  scalar(
    type: ScalarType,
    node: YamlNode,
    path: string,
    duration: { readonly name: string; readonly ms: number } | undefined,
  ): JsonValue | undefined {
    const value: unknown = isScalar(node) ? node.value : undefined
    const wrong = (expected: string) => {
      this.add(path, `must be ${expected}, got ${this.kindOf(node)}`, node)
      return undefined
    }
    switch (type) {
      case ScalarType.STRING:
        if (typeof value === "string") return value
        if (typeof value === "number" || typeof value === "bigint" || typeof value === "boolean")
          return wrong(`a string (quote it: "${String(value)}")`)
        return wrong("a string")
      case ScalarType.BOOL:
        return typeof value === "boolean" ? value : wrong("true or false")
      case ScalarType.BYTES:
        return typeof value === "string" && /^[A-Za-z0-9+/_-]*={0,2}$/.test(value)
          ? value
          : wrong("base64 text")
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT: {
        const n = typeof value === "bigint" ? Number(value) : value
        if (typeof n !== "number") return wrong("a number")
        if (!Number.isFinite(n)) {
          this.add(path, `must be a finite number, got ${n}`, node)
          return undefined
        }
        if (type === ScalarType.FLOAT && Math.abs(n) > 3.4028234663852886e38) {
          this.add(path, `must fit a 32-bit float, got ${n}`, node)
          return undefined
        }
        return n
      }
      default: {
        const range = INT_RANGES[type]
        if (range === undefined) return wrong("a supported scalar")
        const [min, max] = range
        let int: bigint | undefined
        if (typeof value === "bigint") int = value
        else if (typeof value === "number") {
          if (!Number.isInteger(value))
            return wrong(`an integer${duration ? ` (${duration.name})` : ""}`)
          int = BigInt(value)
        } else if (typeof value === "string" && duration !== undefined) {
          const ms = parseDuration(value)
          if (ms === undefined) {
            return wrong(
              `a number of ${duration.name} or a duration like 90s, 10m, 1h30m${duration.ms === 1 ? ", 250ms" : ""}`,
            )
          }
          if (ms % duration.ms !== 0) {
            this.add(path, `must be a whole number of ${duration.name}, got ${value}`, node)
            return undefined
          }
          int = BigInt(ms / duration.ms)
        } else if (typeof value === "string" && IS_64_BIT.has(type) && /^-?\d+$/.test(value)) {
          int = BigInt(value)
        } else {
          return wrong(
            duration ? `a number of ${duration.name} or a duration like 90s, 10m` : "an integer",
          )
        }
        if (int < min || int > max) {
          this.add(path, `must be an integer in [${min}, ${max}], got ${int}`, node)
          return undefined
        }
        return IS_64_BIT.has(type) ? int.toString() : Number(int)
      }
    }
  }
}

// ---- field paths back to positions ------------------------------------------------------------

const SEGMENT = /\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/y

/** The YAML node a proto field path (`spec.labels["k"]`, `spec.task_ids[2]`) points at. */
const nodeAtPath = (c: Converter, fieldPath: string): YamlNode => {
  if (!fieldPath.startsWith("spec")) return undefined
  let node: YamlNode = c.resolve(c.doc.contents)
  let found: YamlNode
  SEGMENT.lastIndex = 4
  while (SEGMENT.lastIndex < fieldPath.length) {
    const m = SEGMENT.exec(fieldPath)
    if (m === null) break
    let next: YamlNode
    if (m[2] !== undefined && isSeq(node)) next = node.items[Number(m[2])]
    else if (isMap(node)) {
      const key: unknown = m[1] ?? (m[3] === undefined ? undefined : JSON.parse(m[3]))
      const pair = node.items.find((p) => {
        const k = c.resolve(p.key)
        return isScalar(k) && String(k.value) === key
      })
      next = pair === undefined ? undefined : (c.resolve(pair.value) ?? pair.key)
    }
    if (next === undefined || next === null) break
    node = c.resolve(next)
    found = node
  }
  return found
}

// ---- entry points -----------------------------------------------------------------------------

const JSON_POSITION = / in JSON at position (\d+)/

/**
 * Parses a job file's text. Never throws: syntax errors, conversion problems and the gateway's
 * validation violations all come back in `problems`, sorted by position.
 */
export const parseJobFile = (text: string, file: string): ParsedJobFile => {
  const format = detectFormat(file, text)
  const lines = new LineCounter()
  const doc = parseDocument(text, {
    intAsBigInt: true,
    lineCounter: lines,
    prettyErrors: false,
    uniqueKeys: true,
  })
  const c = new Converter(doc, lines)
  const done = (spec: JobSpec): ParsedJobFile => {
    const problems = [...c.problems].sort(
      (a, b) => (a.offset ?? Number.POSITIVE_INFINITY) - (b.offset ?? Number.POSITIVE_INFINITY),
    )
    return {
      format,
      spec,
      problems: problems.map(({ offset: _, ...p }) => p),
    }
  }
  const empty = fromJson(JobSpecSchema, {})
  if (format === "json") {
    try {
      JSON.parse(text)
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error)
      const at = JSON_POSITION.exec(message)
      const reason = `JSON syntax error: ${message
        .replace(JSON_POSITION, "")
        .replace(/, ".*" is not valid JSON$/s, "")
        .replaceAll("\n", "\\n")}`
      if (at?.[1] === undefined) c.problems.push({ fieldPath: "", reason })
      else {
        const offset = Number(at[1])
        c.problems.push({ fieldPath: "", reason, offset, ...lines.linePos(offset) })
      }
      if (doc.errors.length === 0) return done(empty)
    }
  }
  if (doc.errors.length > 0) {
    for (const e of doc.errors) {
      const offset = e.pos[0]
      c.problems.push({
        fieldPath: "",
        reason: `${format === "json" ? "JSON" : "YAML"} syntax error: ${e.message.split("\n")[0]}`,
        offset,
        ...lines.linePos(offset),
      })
    }
    return done(empty)
  }
  const root = c.resolve(doc.contents)
  if (root === null || (isScalar(root) && root.value === null)) {
    c.problems.push({
      fieldPath: "spec",
      reason: `the file is empty; expected a mapping of JobSpec fields (${JobSpecSchema.fields
        .map((f) => f.name)
        .join(", ")})`,
    })
    return done(empty)
  }
  const json = c.message(JobSpecSchema, root, "spec")
  let spec = empty
  try {
    spec = fromJson(JobSpecSchema, json, { ignoreUnknownFields: false })
  } catch (error) {
    c.add("spec", error instanceof Error ? error.message : String(error), root)
    return done(empty)
  }
  const isCovered = (path: string) =>
    [...c.covered].some((p) => path === p || path.startsWith(`${p}.`) || path.startsWith(`${p}[`))
  for (const v of validateJobSpec(spec)) {
    if (isCovered(v.fieldPath)) continue
    c.add(v.fieldPath, v.reason, nodeAtPath(c, v.fieldPath))
  }
  return done(spec)
}

/** The spec as protobuf JSON with the proto field names: a valid job file itself. */
export const specToJson = (spec: JobSpec): JsonValue =>
  toJson(JobSpecSchema, spec, { useProtoFieldName: true })

/** The default SubmitJob request_id of a file: the same bytes give the same job. */
export const contentRequestId = (bytes: Uint8Array | string): string =>
  `sha256-${createHash("sha256").update(bytes).digest("hex")}`
