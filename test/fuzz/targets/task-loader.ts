import {
  copyFileSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, References } from "effect"
import { parse as parseToml, stringify as stringifyToml } from "smol-toml"
import YAML from "yaml"
import { loadTask } from "../../../tasks/load/index.ts"
import { type FuzzTarget, judgeEffectAsync } from "../harness.ts"
import { toHex } from "../mutate.ts"
import { type Doc, mutateDoc } from "../mutate-json.ts"
import { invalidUtf8, mutateText } from "../mutate-text.ts"
import type { Random } from "../random.ts"

/**
 * Task directories of every format (the TB2, TB1 and native fixtures), copied to a temporary
 * directory with one or two files changed — parsed and given a node of the wrong type or an
 * extreme value, edited as text, made invalid UTF-8, replaced by random bytes, emptied, made huge,
 * deleted or turned into a directory — then loaded with loadTask.
 */
const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), "../../../tasks/fixtures")

interface Fixture {
  readonly path: string
  /** Files worth changing, the config file first (chosen more often). */
  readonly files: ReadonlyArray<string>
}

const FIXTURE_LIST: ReadonlyArray<Fixture> = [
  {
    path: "tb2/csv-column-sum",
    files: [
      "task.toml",
      "instruction.md",
      "environment/Dockerfile",
      "solution/solve.sh",
      "tests/test.sh",
      "tests/test_outputs.py",
    ],
  },
  {
    path: "tb2/listen-port-legacy",
    files: ["task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh"],
  },
  {
    path: "tb1/fix-permissions",
    files: [
      "task.yaml",
      "solution.yaml",
      "docker-compose.yaml",
      "Dockerfile",
      "run-tests.sh",
      "tests/test_outputs.py",
    ],
  },
  {
    path: "tb1/word-count",
    files: ["task.yaml", "docker-compose.yaml", "solution.sh", "run-tests.sh"],
  },
  {
    path: "native/grep-errors",
    files: ["task.json", "instruction.md", "setup.sh", "solution/solve.sh", "tests/test_grep.py"],
  },
]

type Change =
  | { readonly file: string; readonly kind: "write"; readonly bytes: Uint8Array }
  | { readonly file: string; readonly kind: "delete" | "directory" }

/** The document in `text` changed structurally and written back in its own syntax. */
const mutateStructured = (rng: Random, file: string, text: string): string | undefined => {
  try {
    if (file.endsWith(".toml"))
      return stringifyToml(mutateDoc(rng, parseToml(text) as Doc) as Record<string, unknown>)
    if (file.endsWith(".yaml")) return YAML.stringify(mutateDoc(rng, YAML.parse(text) as Doc))
    if (file.endsWith(".json")) return JSON.stringify(mutateDoc(rng, JSON.parse(text) as Doc))
  } catch {
    // The mutated document has no form in this syntax (e.g. null in TOML): edit the text instead.
  }
  return undefined
}

const change = (rng: Random, fixture: Fixture, file: string): Change => {
  const text = readFileSync(join(FIXTURES, fixture.path, file), "utf8")
  const encode = (s: string) => new TextEncoder().encode(s)
  const roll = rng.int(10)
  if (roll < 4) {
    const structured = mutateStructured(rng, file, text)
    if (structured !== undefined) return { file, kind: "write", bytes: encode(structured) }
  }
  switch (roll) {
    case 4:
      return { file, kind: "write", bytes: invalidUtf8(rng, text) }
    case 5:
      return {
        file,
        kind: "write",
        bytes: rng.bool() ? rng.bytes(rng.size(512)) : new Uint8Array(0),
      }
    case 6:
      return rng.bool(0.7) ? { file, kind: "delete" } : { file, kind: "directory" }
    case 7:
      return {
        file,
        kind: "write",
        bytes: encode(rng.bool() ? text.repeat(100) : `${text}\n${"#".repeat(1 << 20)}`),
      }
    default:
      return { file, kind: "write", bytes: encode(mutateText(rng, text)) }
  }
}

let scratch = ""

const apply = (dir: string, c: Change): void => {
  const path = join(dir, c.file)
  rmSync(path, { recursive: true, force: true })
  if (c.kind === "delete") return
  mkdirSync(c.kind === "directory" ? path : dirname(path), { recursive: true })
  if (c.kind === "write") writeFileSync(path, c.bytes)
}

/** Puts the changed files back as the fixture has them (cheaper than a fresh copy per case). */
const restore = (fixture: Fixture, dir: string, changes: ReadonlyArray<Change>): void => {
  for (const c of changes) {
    const path = join(dir, c.file)
    rmSync(path, { recursive: true, force: true })
    copyFileSync(join(FIXTURES, fixture.path, c.file), path)
  }
}

const load = (fixture: Fixture, changes: ReadonlyArray<Change>) => {
  // One working copy per fixture; its parent directory names the task set, itself the task id.
  const dir = join(scratch, "tasks", fixture.path)
  for (const c of changes) apply(dir, c)
  return judgeEffectAsync(
    loadTask(dir, { cacheDir: join(scratch, "cache") }).pipe(
      Effect.provideService(References.MinimumLogLevel, "None"),
      Effect.ensuring(Effect.sync(() => restore(fixture, dir, changes))),
    ),
  )
}

const show = (fixture: Fixture, changes: ReadonlyArray<Change>): string =>
  [
    fixture.path,
    ...changes.map((c) =>
      c.kind === "write"
        ? `${c.file} := ${toHex(c.bytes.subarray(0, 8192))}`
        : `${c.file}: ${c.kind}`,
    ),
  ].join("; ")

export const taskLoaderTarget: FuzzTarget = {
  name: "task loader",
  description: "TB2/TB1/native task directories with files changed → loadTask (tasks/load)",
  setup: async () => {
    scratch = mkdtempSync(join(tmpdir(), "t1-fuzz-tasks-"))
    for (const f of FIXTURE_LIST)
      cpSync(join(FIXTURES, f.path), join(scratch, "tasks", f.path), { recursive: true })
  },
  teardown: async () => {
    rmSync(scratch, { recursive: true, force: true })
  },
  make: (rng) => {
    const fixture = rng.pick(FIXTURE_LIST)
    const changes: Change[] = []
    for (let n = rng.bool(0.1) ? 0 : rng.range(1, 2); n > 0; n--) {
      const file = rng.bool(0.5) ? (fixture.files[0] ?? "") : rng.pick(fixture.files)
      changes.push(change(rng, fixture, file))
    }
    return { input: () => show(fixture, changes), run: () => load(fixture, changes) }
  },
}
