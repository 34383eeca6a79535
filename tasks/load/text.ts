import { readFile, stat } from "node:fs/promises"
import { Effect } from "effect"
import { parse as parseTomlText, TomlError } from "smol-toml"
import YAML from "yaml"
import { TaskLoadError } from "./errors.ts"

/** What is at a path: undefined when nothing is. */
export const pathKind = (path: string): Effect.Effect<"file" | "directory" | "other" | undefined> =>
  Effect.promise(() =>
    stat(path).then(
      (s) => (s.isFile() ? "file" : s.isDirectory() ? "directory" : "other"),
      () => undefined,
    ),
  )

/** Offset of the first byte that does not start or continue a well-formed UTF-8 sequence. */
export const invalidUtf8Offset = (bytes: Uint8Array): number => {
  let i = 0
  while (i < bytes.length) {
    const lead = bytes[i] ?? 0
    if (lead < 0x80) {
      i += 1
      continue
    }
    const length = lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : 4
    if (lead < 0xc2 || lead > 0xf4) return i
    // The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF.
    const low = lead === 0xe0 ? 0xa0 : lead === 0xf0 ? 0x90 : 0x80
    const high = lead === 0xed ? 0x9f : lead === 0xf4 ? 0x8f : 0xbf
    const second = bytes[i + 1]
    if (second === undefined || second < low || second > high) return i
    for (let k = 2; k < length; k++) {
      const next = bytes[i + k]
      if (next === undefined || next < 0x80 || next > 0xbf) return i
    }
    i += length
  }
  return -1
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** Decodes UTF-8 strictly (a leading BOM is dropped); anything else is a TaskLoadError. */
export const decodeUtf8 = (file: string, bytes: Uint8Array): Effect.Effect<string, TaskLoadError> =>
  Effect.try({
    try: () => utf8.decode(bytes),
    catch: () => {
      const offset = invalidUtf8Offset(bytes)
      const line = bytes.subarray(0, Math.max(offset, 0)).filter((b) => b === 0x0a).length + 1
      const byte = (bytes[offset] ?? 0).toString(16).padStart(2, "0")
      return new TaskLoadError({
        file,
        expected: "UTF-8 text",
        got: `a byte that is not UTF-8 on line ${line} (0x${byte} at byte offset ${offset})`,
      })
    },
  })

/** A whole text file, strictly UTF-8. */
export const readUtf8 = (file: string): Effect.Effect<string, TaskLoadError> =>
  Effect.tryPromise({
    try: () => readFile(file),
    catch: (error) =>
      new TaskLoadError({ file, expected: "a readable file", got: describeFsError(error) }),
  }).pipe(Effect.flatMap((bytes) => decodeUtf8(file, bytes)))

/** A text file whose encoding does not matter to the loader (test sources, Dockerfiles). */
export const readLenient = (file: string): Effect.Effect<string | undefined> =>
  Effect.promise(() => readFile(file, "utf8").catch(() => undefined))

const describeFsError = (error: unknown): string => {
  const code =
    typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  if (code === "ENOENT") return "nothing (no such file)"
  if (code === "EISDIR") return "a directory"
  if (code === "EACCES" || code === "EPERM") return "a file this process may not read"
  return error instanceof Error ? error.message : String(error)
}

const syntaxError = (
  file: string,
  language: string,
  line: number | undefined,
  column: number | undefined,
  reason: string,
): TaskLoadError =>
  new TaskLoadError({
    file,
    expected: `valid ${language}`,
    got:
      line === undefined
        ? `a syntax error: ${reason}`
        : `a syntax error at line ${line}, column ${column ?? 1}: ${reason}`,
  })

const firstLine = (message: string): string => (message.split("\n")[0] ?? "").trim()

export const parseToml = (file: string, text: string): Effect.Effect<unknown, TaskLoadError> =>
  Effect.try({
    try: () => parseTomlText(text),
    catch: (error) =>
      error instanceof TomlError
        ? syntaxError(
            file,
            "TOML",
            error.line,
            error.column,
            firstLine(error.message).replace(/^Invalid TOML document:\s*/, ""),
          )
        : syntaxError(file, "TOML", undefined, undefined, String(error)),
  })

export const parseYaml = (file: string, text: string): Effect.Effect<unknown, TaskLoadError> => {
  const doc = YAML.parseDocument(text, { prettyErrors: true })
  const error = doc.errors[0]
  if (error !== undefined) {
    const at = error.linePos?.[0]
    const reason = firstLine(error.message).replace(/\s*at line \d+, column \d+:?$/, "")
    return Effect.fail(syntaxError(file, "YAML", at?.line, at?.col, reason))
  }
  return Effect.try({
    try: () => doc.toJS({ maxAliasCount: 100 }) as unknown,
    catch: (e) => syntaxError(file, "YAML", undefined, undefined, firstLine(String(e))),
  })
}

export const parseJson = (file: string, text: string): Effect.Effect<unknown, TaskLoadError> =>
  Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: (error) => {
      const message = error instanceof Error ? error.message : String(error)
      const position = /at position (\d+)/.exec(message)?.[1]
      if (position === undefined) return syntaxError(file, "JSON", undefined, undefined, message)
      const before = text.slice(0, Number(position)).split("\n")
      const reason = message.replace(/\s*in JSON at position \d+.*$/, "")
      return syntaxError(file, "JSON", before.length, (before.at(-1)?.length ?? 0) + 1, reason)
    },
  })
