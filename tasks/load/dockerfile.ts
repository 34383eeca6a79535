/**
 * Just enough of the Dockerfile grammar to rewrite FROM lines and to reject what an offline
 * build cannot do, keeping each instruction's line number for error messages.
 */

export interface Instruction {
  /** 1-based line where the instruction starts. */
  readonly line: number
  /** Physical lines it spans (continuations included). */
  readonly lines: number
  /** Upper-case keyword: FROM, RUN, COPY… */
  readonly keyword: string
  /** Everything after the keyword, continuations joined, trimmed. */
  readonly args: string
  /** The instruction as written, continuations joined: for messages. */
  readonly text: string
}

const DIRECTIVE = /^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$/

/** The escape character: `\` unless a leading `# escape=` directive says otherwise. */
const escapeOf = (lines: ReadonlyArray<string>): string => {
  for (const line of lines) {
    const directive = DIRECTIVE.exec(line)
    if (directive === null) break
    if (directive[1]?.toLowerCase() === "escape" && (directive[2] === "`" || directive[2] === "\\"))
      return directive[2]
  }
  return "\\"
}

export const parseDockerfile = (source: string): ReadonlyArray<Instruction> => {
  const lines = source.split(/\r?\n/)
  const escapeChar = escapeOf(lines)
  const out: Instruction[] = []
  let start = -1
  let parts: string[] = []
  const flush = (end: number) => {
    const text = parts.join(" ").trim()
    parts = []
    if (text === "") return
    const match = /^(\S+)\s*([\s\S]*)$/.exec(text)
    if (match === null) return
    out.push({
      line: start + 1,
      lines: end - start + 1,
      keyword: (match[1] ?? "").toUpperCase(),
      args: (match[2] ?? "").trim(),
      text,
    })
  }
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i] ?? ""
    const trimmed = raw.trim()
    // Comments and blank lines are dropped, inside a continuation too.
    if (trimmed.startsWith("#") || (trimmed === "" && parts.length === 0)) continue
    if (parts.length === 0) start = i
    const trailing = raw.replace(/\s+$/, "")
    if (trailing.endsWith(escapeChar)) {
      parts.push(trailing.slice(0, -1).trim())
      continue
    }
    parts.push(trimmed)
    flush(i)
  }
  if (parts.length > 0) flush(lines.length - 1)
  return out
}

export interface FromClause {
  readonly flags: ReadonlyArray<string>
  readonly image: string
  /** The stage name after AS, if any. */
  readonly stage: string | undefined
}

export const parseFrom = (args: string): FromClause => {
  const words = args.split(/\s+/).filter((w) => w !== "")
  const flags = words.filter((w) => w.startsWith("--"))
  const rest = words.filter((w) => !w.startsWith("--"))
  const asAt = rest.findIndex((w) => w.toUpperCase() === "AS")
  return {
    flags,
    image: rest[0] ?? "",
    stage: asAt >= 0 ? rest[asAt + 1] : undefined,
  }
}

/** `python` → `python:latest`; `docker.io/library/python:3` → `python:3`. */
export const normalizeReference = (reference: string): string => {
  const stripped = reference.replace(/^(docker\.io|index\.docker\.io)\/(library\/)?/, "")
  if (stripped.includes("@")) return stripped
  const lastSegment = stripped.slice(stripped.lastIndexOf("/") + 1)
  return lastSegment.includes(":") ? stripped : `${stripped}:latest`
}

/** Glob patterns (`*` matches anything, `/` included) from a FROM reference to a local image. */
export type ImageAliases = Readonly<Record<string, string>>

/** Public images task Dockerfiles start from, served offline by the base image. */
export const DEFAULT_ALIASES: ImageAliases = {
  "python:*": "t1-base:latest",
  "ubuntu:*": "t1-base:latest",
  "debian:*": "t1-base:latest",
  "ghcr.io/laude-institute/t-bench/*": "t1-base:latest",
}

const globToRegExp = (pattern: string): RegExp =>
  new RegExp(
    `^${pattern
      .split("*")
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`,
  )

/**
 * Where a reference goes: the first matching alias of `overrides`, then of the defaults;
 * undefined when none matches.
 */
export const resolveAlias = (
  reference: string,
  overrides: ImageAliases = {},
  defaults: ImageAliases = DEFAULT_ALIASES,
): string | undefined => {
  const candidates = [reference, normalizeReference(reference)]
  for (const table of [overrides, defaults]) {
    for (const [pattern, target] of Object.entries(table)) {
      const re = globToRegExp(pattern)
      if (candidates.some((c) => re.test(c))) return target
    }
  }
  return undefined
}

/** ARG defaults declared before the first FROM, substituted into FROM lines as the builder does. */
const substituteMetaArgs = (image: string, args: ReadonlyMap<string, string>): string =>
  image.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (whole, a, b) => {
    const value = args.get(String(a ?? b))
    return value === undefined ? whole : value
  })

export interface FromRewrite {
  readonly line: number
  readonly from: string
  readonly to: string
}

export interface RewrittenDockerfile {
  readonly text: string
  readonly rewrites: ReadonlyArray<FromRewrite>
  /** Every image the build starts from after rewriting (stage names and scratch excluded). */
  readonly baseImages: ReadonlyArray<{ readonly line: number; readonly image: string }>
}

/**
 * Rewrites each FROM through the alias map. Line numbers are kept: a FROM spanning several lines
 * becomes one line followed by blank ones.
 */
export const rewriteFrom = (
  source: string,
  overrides: ImageAliases = {},
  defaults: ImageAliases = DEFAULT_ALIASES,
): RewrittenDockerfile => {
  const lines = source.split(/\r?\n/)
  const instructions = parseDockerfile(source)
  const metaArgs = new Map<string, string>()
  const stages = new Set<string>()
  const rewrites: FromRewrite[] = []
  const baseImages: Array<{ line: number; image: string }> = []
  let sawFrom = false
  for (const instruction of instructions) {
    if (instruction.keyword === "ARG" && !sawFrom) {
      const [name, ...value] = instruction.args.split("=")
      if (name !== undefined && value.length > 0)
        metaArgs.set(
          name.trim(),
          value
            .join("=")
            .trim()
            .replace(/^"(.*)"$/, "$1"),
        )
      continue
    }
    if (instruction.keyword !== "FROM") continue
    sawFrom = true
    const from = parseFrom(instruction.args)
    const image = substituteMetaArgs(from.image, metaArgs)
    const isStage = stages.has(image.toLowerCase())
    if (from.stage !== undefined) stages.add(from.stage.toLowerCase())
    if (isStage || image.toLowerCase() === "scratch") continue
    const target = resolveAlias(image, overrides, defaults)
    baseImages.push({ line: instruction.line, image: target ?? image })
    if (target === undefined && image === from.image) continue
    const rewritten = [
      "FROM",
      ...from.flags,
      target ?? image,
      ...(from.stage === undefined ? [] : ["AS", from.stage]),
    ].join(" ")
    const index = instruction.line - 1
    lines[index] = rewritten
    for (let k = 1; k < instruction.lines; k++) lines[index + k] = ""
    if (target !== undefined)
      rewrites.push({ line: instruction.line, from: from.image, to: target })
  }
  return { text: lines.join("\n"), rewrites, baseImages }
}

export interface UnsupportedInstruction {
  readonly line: number
  readonly text: string
  readonly reason: string
}

const URL_SOURCE = /^(https?|ftp):\/\/|^git@|\.git(#.*)?$/i

/** What an offline build cannot do, found before the build starts. */
export const findUnsupported = (
  instructions: ReadonlyArray<Instruction>,
): UnsupportedInstruction | undefined => {
  for (const instruction of instructions) {
    if (instruction.keyword === "ADD") {
      const words = instruction.args.split(/\s+/).filter((w) => w !== "" && !w.startsWith("--"))
      const sources = words.slice(0, -1)
      const remote = sources.find((s) => URL_SOURCE.test(s.replace(/^\[?"?|"?,?\]?$/g, "")))
      if (remote !== undefined)
        return {
          line: instruction.line,
          text: instruction.text,
          reason: `ADD of a remote source (${remote}) needs the network, and task builds are offline: vendor the file into the task directory and COPY it`,
        }
    }
    if (
      (instruction.keyword === "RUN" || instruction.keyword === "COPY") &&
      /<<-?\s*["']?[A-Za-z_][A-Za-z0-9_]*["']?\s*$/.test(instruction.args)
    ) {
      return {
        line: instruction.line,
        text: instruction.text,
        reason: "heredocs in Dockerfiles need BuildKit; the offline builder is the classic one",
      }
    }
  }
  return undefined
}
