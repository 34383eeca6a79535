import { readdir } from "node:fs/promises"
import { join, posix } from "node:path"
import { Effect } from "effect"
import { parseDockerfile } from "./dockerfile.ts"
import { TaskLoadError } from "./errors.ts"
import { pathKind, readLenient, readUtf8 } from "./text.ts"

const KIND_WORD = { file: "a file", directory: "a directory", other: "something else" } as const

const requireKind = (
  path: string,
  kind: "file" | "directory",
  expected: string,
): Effect.Effect<string, TaskLoadError> =>
  Effect.flatMap(pathKind(path), (found) =>
    found === kind
      ? Effect.succeed(path)
      : Effect.fail(
          new TaskLoadError({
            file: path,
            expected,
            got: found === undefined ? "nothing (it does not exist)" : KIND_WORD[found],
          }),
        ),
  )

export const requireFile = (path: string, expected: string) => requireKind(path, "file", expected)

export const requireDirectory = (path: string, expected: string) =>
  requireKind(path, "directory", expected)

/** The path when a file is there, else undefined. */
export const optionalFile = (path: string): Effect.Effect<string | undefined> =>
  Effect.map(pathKind(path), (kind) => (kind === "file" ? path : undefined))

/** instruction.md: required, strictly UTF-8, not blank; returned verbatim. */
export const readInstruction = (file: string): Effect.Effect<string, TaskLoadError> =>
  Effect.gen(function* () {
    yield* requireFile(file, "the task's instruction (a markdown file)")
    const text = yield* readUtf8(file)
    if (text.trim() === "")
      return yield* new TaskLoadError({
        file,
        expected: "a non-empty instruction",
        got: "a blank file",
      })
    return text
  })

const TEST_FUNCTION = /^[ \t]*(?:async[ \t]+)?def[ \t]+test_\w*[ \t]*\(/gm

/**
 * Test functions (`def test_…`, methods included) in the *.py files directly in `testsDir`:
 * what a pytest run reports when nothing is parametrised. 0 when there are none.
 */
export const countTestFunctions = (testsDir: string): Effect.Effect<number> =>
  Effect.gen(function* () {
    const names = yield* Effect.promise(() => readdir(testsDir).catch(() => []))
    let count = 0
    for (const name of names.filter((n) => n.endsWith(".py")).sort()) {
      const source = yield* readLenient(join(testsDir, name))
      count += source?.match(TEST_FUNCTION)?.length ?? 0
    }
    return count
  })

/**
 * The directory the Dockerfile's final stage leaves the container in (its last WORKDIR, relative
 * ones resolved, inherited through `FROM <stage>`); undefined when it sets none or uses variables.
 */
export const dockerfileWorkdir = (dockerfile: string): Effect.Effect<string | undefined> =>
  Effect.map(readLenient(dockerfile), (source) => {
    if (source === undefined) return undefined
    const stages = new Map<string, string | undefined>()
    let stage: string | undefined
    let workdir: string | undefined
    for (const instruction of parseDockerfile(source)) {
      if (instruction.keyword === "FROM") {
        const words = instruction.args.split(/\s+/).filter((w) => w !== "" && !w.startsWith("--"))
        workdir = stages.get((words[0] ?? "").toLowerCase())
        stage = words[1]?.toUpperCase() === "AS" ? words[2]?.toLowerCase() : undefined
      } else if (instruction.keyword === "WORKDIR") {
        const dir = instruction.args.replace(/^(["'])(.*)\1$/, "$2")
        workdir =
          dir === "" || dir.includes("$")
            ? undefined
            : posix
                .normalize(dir.startsWith("/") ? dir : posix.join(workdir ?? "/", dir))
                .replace(/(.)\/+$/, "$1")
      }
      if (stage !== undefined) stages.set(stage, workdir)
    }
    return workdir
  })
