/**
 * The engine of the ladder families (families/ladder.ts): a task is a short list of steps, each
 * one English sentence and one shell command, applied to a small model of the workdir. The
 * instruction is the steps' sentences (one per line, each exactly as its one-step task writes
 * it), the reference solution is their commands (one per line: one per agent turn), and the
 * tests are derived from the difference between the workdir before and after — several per
 * changed path, so that every step done right earns its own tests (dense reward).
 */
import type { Difficulty, GeneratedTask, Pool, TaskBindings } from "./family.ts"
import { type LadderGuard, type LadderTest, ladderBash } from "./ladder-checks.ts"
import {
  CONTENT_WORDS,
  LADDER_EXT,
  LADDER_TRAP_EXT,
  type NamePool,
  namePool,
  nameWord,
} from "./ladder-pools.ts"
import { makeRng, type Rng } from "./rng.ts"
import { bashScript, createFiles } from "./shell.ts"

/** How a file got its content; decides which tests check it. */
type Made =
  | { readonly by: "setup" }
  | { readonly by: "touch" }
  | { readonly by: "write"; readonly value: string }
  | { readonly by: "append"; readonly value: string; readonly base: string }
  | { readonly by: "count"; readonly count: number; readonly of: string }
  | {
      readonly by: "grep"
      readonly word: string
      readonly of: string
      readonly lines: ReadonlyArray<string>
    }
  | { readonly by: "copy"; readonly of: string }

type Entry =
  | { readonly kind: "dir" }
  | { readonly kind: "file"; readonly content: string; readonly made: Made }

/** Relative path -> entry; folders are explicit entries. */
type Tree = Map<string, Entry>

export interface Step {
  /** One sentence, capitalised, ending with a full stop; names as the command writes them. */
  readonly sentence: string
  /**
   * An observation step's look (ladder-observe.ts): one line of bash that changes nothing and
   * prints what `command` needs, which the sentence does not say. The reference runs it first,
   * one agent turn of its own.
   */
  readonly look?: string
  /** One line of bash, run in the workdir. */
  readonly command: string
  readonly apply: (tree: Tree) => void
}

class StepError extends Error {}

const fileAt = (tree: Tree, path: string) => {
  const entry = tree.get(path)
  if (entry?.kind !== "file") throw new StepError(`no file ${path}`)
  return entry
}

const dirAt = (tree: Tree, path: string) => {
  if (tree.get(path)?.kind !== "dir") throw new StepError(`no folder ${path}`)
}

const fresh = (tree: Tree, path: string) => {
  if (tree.has(path)) throw new StepError(`${path} exists already`)
}

const baseName = (path: string) => path.slice(path.lastIndexOf("/") + 1)

export const linesOf = (content: string): Array<string> =>
  content === "" ? [] : content.replace(/\n$/, "").split("\n")

/**
 * What a copied or moved file is checked for: what made its source, when a step of this task did
 * (a value written, then moved, is still checked as that value), else that it is a copy.
 */
const carried = (made: Made, from: string): Made =>
  made.by === "setup" || made.by === "copy" ? { by: "copy", of: from } : made

// The steps. Each sentence is the whole instruction of its one-step family.

export const touch = (file: string): Step => ({
  sentence: `Create an empty file named ${file}.`,
  command: `touch ${file}`,
  apply: (tree) => {
    fresh(tree, file)
    tree.set(file, { kind: "file", content: "", made: { by: "touch" } })
  },
})

export const mkdir = (dir: string): Step => ({
  sentence: `Make a folder named ${dir}.`,
  command: `mkdir ${dir}`,
  apply: (tree) => {
    fresh(tree, dir)
    tree.set(dir, { kind: "dir" })
  },
})

export const write = (file: string, value: string): Step => ({
  sentence: `Write ${value} to the file ${file}.`,
  command: `echo ${value} > ${file}`,
  apply: (tree) => {
    if (tree.get(file)?.kind === "dir") throw new StepError(`${file} is a folder`)
    tree.set(file, { kind: "file", content: `${value}\n`, made: { by: "write", value } })
  },
})

export const append = (file: string, value: string): Step => ({
  sentence: `Add the line ${value} to ${file}.`,
  command: `echo ${value} >> ${file}`,
  apply: (tree) => {
    const base = fileAt(tree, file).content
    if (base !== "" && !base.endsWith("\n")) throw new StepError(`${file} lacks a final newline`)
    tree.set(file, {
      kind: "file",
      content: `${base}${value}\n`,
      made: { by: "append", value, base },
    })
  },
})

export const copy = (from: string, to: string): Step => ({
  sentence: `Copy ${from} to ${to}.`,
  command: `cp ${from} ${to}`,
  apply: (tree) => {
    const source = fileAt(tree, from)
    fresh(tree, to)
    tree.set(to, { kind: "file", content: source.content, made: carried(source.made, from) })
  },
})

export const rename = (from: string, to: string): Step => ({
  sentence: `Rename ${from} to ${to}.`,
  command: `mv ${from} ${to}`,
  apply: (tree) => {
    const source = fileAt(tree, from)
    fresh(tree, to)
    tree.delete(from)
    tree.set(to, { kind: "file", content: source.content, made: carried(source.made, from) })
  },
})

export const remove = (file: string): Step => ({
  sentence: `Delete the file ${file}.`,
  command: `rm ${file}`,
  apply: (tree) => {
    fileAt(tree, file)
    tree.delete(file)
  },
})

export const count = (from: string, to: string): Step => ({
  sentence: `Write the number of lines in ${from} to ${to}.`,
  command: `wc -l < ${from} > ${to}`,
  apply: (tree) => {
    const n = linesOf(fileAt(tree, from).content).length
    fresh(tree, to)
    tree.set(to, { kind: "file", content: `${n}\n`, made: { by: "count", count: n, of: from } })
  },
})

export const grep = (word: string, from: string, to: string): Step => ({
  sentence: `Write the lines of ${from} that contain ${word} to ${to}.`,
  command: `grep ${word} ${from} > ${to}`,
  apply: (tree) => {
    const lines = linesOf(fileAt(tree, from).content).filter((l) => l.includes(word))
    if (lines.length === 0) throw new StepError(`no line of ${from} contains ${word}`)
    fresh(tree, to)
    tree.set(to, {
      kind: "file",
      content: `${lines.join("\n")}\n`,
      made: { by: "grep", word, of: from, lines },
    })
  },
})

export const copyInto = (from: string, dir: string): Step => ({
  sentence: `Copy ${from} into the folder ${dir}.`,
  command: `cp ${from} ${dir}`,
  apply: (tree) => {
    const source = fileAt(tree, from)
    dirAt(tree, dir)
    const to = `${dir}/${baseName(from)}`
    fresh(tree, to)
    tree.set(to, { kind: "file", content: source.content, made: carried(source.made, from) })
  },
})

export const moveInto = (from: string, dir: string): Step => ({
  sentence: `Move ${from} into the folder ${dir}.`,
  command: `mv ${from} ${dir}`,
  apply: (tree) => {
    const source = fileAt(tree, from)
    dirAt(tree, dir)
    const to = `${dir}/${baseName(from)}`
    fresh(tree, to)
    tree.delete(from)
    tree.set(to, { kind: "file", content: source.content, made: carried(source.made, from) })
  },
})

/**
 * Draws a task's names from its pool, each name at most once per task: no two files share a
 * stem (except the hard tier's trap), and no folder or grep word is a file's stem.
 */
export class Draw {
  private rng: Rng
  private hiddenRng: Rng | undefined
  private readonly names: NamePool
  private readonly used = new Set<string>()
  private readonly taken = new Set<string>()
  readonly initialFiles = new Map<string, string>()
  readonly initialDirs: Array<string> = []
  readonly bindings = {
    files: [] as Array<string>,
    dirs: [] as Array<string>,
    words: [] as Array<string>,
    values: [] as Array<string>,
  }

  constructor(
    rng: Rng,
    pool: Pool,
    private readonly hiddenSalt = "",
  ) {
    this.rng = rng
    this.names = namePool(pool)
  }

  /**
   * Runs `draws` on the hidden stream: what the instruction never says (the names and contents an
   * observation step's look reveals). The stream is forked from the task's own on first use, with
   * `hiddenSalt` (GenerateContext): another salt gives another hidden world behind the same
   * instruction, as long as every visible name was drawn before.
   */
  hidden<A>(draws: () => A): A {
    if (this.hiddenRng === undefined)
      this.hiddenRng = makeRng(`hidden/${this.rng.float()}/${this.hiddenSalt}`)
    const visible = this.rng
    this.rng = this.hiddenRng
    try {
      return draws()
    } finally {
      this.rng = visible
    }
  }

  /** A file that setup creates inside `dir` (a folder setup creates); returns its path. */
  sourceIn(dir: string, content?: string): string {
    const path = `${dir}/${this.newFile()}`
    this.initialFiles.set(path, content ?? this.lines())
    return path
  }

  /** Sets what setup writes into `path` (a pointer file's content, known only after the draw). */
  fill(path: string, content: string): void {
    this.initialFiles.set(path, content)
  }

  /** A uniform pick from the current stream. */
  pick<T>(items: ReadonlyArray<T>): T {
    return this.rng.pick(items)
  }

  /** A name whose word no other name of the task has, so each name is copied from one place. */
  private word(): string {
    const free = this.names.names.filter((n) => !this.used.has(nameWord(n)))
    // A long observation chain can use every word: names then share a word, never a whole name.
    const name = this.rng.pick(
      free.length > 0 ? free : this.names.names.filter((n) => !this.taken.has(n)),
    )
    this.used.add(nameWord(name))
    this.taken.add(name)
    return name
  }

  /** A file name that does not exist yet (a step creates it). */
  newFile(): string {
    const name = `${this.word()}.${LADDER_EXT}`
    this.bindings.files.push(name)
    return name
  }

  /** A file that setup creates: a few lines of text, some of them with `word` when given. */
  source(word?: string): string {
    const name = this.newFile()
    this.initialFiles.set(name, this.lines(word))
    return name
  }

  /** A folder name that does not exist yet. */
  newDir(): string {
    const dir = this.word()
    this.bindings.dirs.push(dir)
    return dir
  }

  /** A folder that setup creates, empty. */
  existingDir(): string {
    const dir = this.newDir()
    this.initialDirs.push(dir)
    return dir
  }

  /** A word to search for. */
  grepWord(): string {
    const word = this.word()
    this.bindings.words.push(word)
    return word
  }

  value(): string {
    const value = this.word()
    this.bindings.values.push(value)
    return value
  }

  /** 2–5 lines of content words; with `word`, 4–7 lines of which some (not all) contain it. */
  lines(word?: string): string {
    const line = () =>
      Array.from({ length: this.rng.int(2, 4) }, () => this.rng.pick(CONTENT_WORDS))
    if (word === undefined)
      return `${Array.from({ length: this.rng.int(2, 5) }, () => line().join(" ")).join("\n")}\n`
    const n = this.rng.int(4, 7)
    const hits = new Set(this.rng.sample([...Array(n).keys()], this.rng.int(1, n - 2)))
    const out = Array.from({ length: n }, (_, i) => {
      const words = line()
      if (hits.has(i)) words.splice(this.rng.int(0, words.length), 0, word)
      return words.join(" ")
    })
    return `${out.join("\n")}\n`
  }

  /**
   * Files the task does not mention, created by setup: easy 1, medium 2, hard 2 and a trap, a
   * file named like `near` (the task's first file) with another extension. Returns the trap.
   */
  distractors(difficulty: Difficulty, near: string | undefined): string | undefined {
    let trap: string | undefined
    if (difficulty === "hard" && near !== undefined) {
      trap = `${near.slice(0, near.lastIndexOf("."))}.${LADDER_TRAP_EXT}`
      this.bindings.files.push(trap)
      this.initialFiles.set(trap, this.lines())
    }
    const plain = { easy: 1, medium: 2, hard: 2 }[difficulty]
    for (let k = 0; k < plain; k++) this.source()
    return trap
  }
}

/** A test-name piece for a path: `delta/lemon.log` -> `delta_lemon_log`. */
const slug = (path: string) => path.replace(/[^A-Za-z0-9]+/g, "_").toLowerCase()

const sortedPaths = (tree: Tree) => [...tree.keys()].sort()

const fileTests = (
  path: string,
  entry: Entry & { kind: "file" },
  isNew: boolean,
): Array<LadderTest> => {
  const s = slug(path)
  const tests: Array<LadderTest> = []
  if (isNew)
    tests.push({
      name: `${s}_exists`,
      doc: `${path} exists and is a file`,
      check: { kind: "isFile", path },
    })
  const made = entry.made
  switch (made.by) {
    case "touch":
      tests.push({
        name: `${s}_is_empty`,
        doc: `${path} is empty`,
        check: { kind: "isEmptyFile", path },
      })
      return tests
    case "write":
      tests.push({
        name: `${s}_holds_value`,
        doc: `${path} holds ${made.value}`,
        check: { kind: "holds", path, value: made.value },
      })
      break
    case "append": {
      tests.push({
        name: `${s}_ends_with_line`,
        doc: `the last line of ${path} is ${made.value}`,
        check: { kind: "endsWithLine", path, line: made.value },
      })
      const before = linesOf(made.base)
      if (before.length > 0)
        tests.push({
          name: `${s}_keeps_earlier_lines`,
          doc: `${path} keeps the lines it had before, in front of the new one`,
          check: { kind: "linesBeforeLast", path, lines: before },
        })
      break
    }
    case "count":
      tests.push({
        name: `${s}_holds_count`,
        doc: `${path} holds the number of lines of ${made.of}`,
        check: { kind: "firstWord", path, word: String(made.count) },
      })
      break
    case "grep":
      tests.push(
        {
          name: `${s}_lines_contain_word`,
          doc: `every line of ${path} contains ${made.word}`,
          check: { kind: "everyLineHas", path, word: made.word },
        },
        {
          name: `${s}_has_every_match`,
          doc: `${path} has every line of ${made.of} that contains ${made.word}`,
          check: { kind: "hasLines", path, lines: made.lines },
        },
      )
      break
    case "copy":
    case "setup":
      break
  }
  tests.push({
    name: `${s}_content`,
    doc: `${path} has exactly the expected content`,
    check: { kind: "content", path, content: entry.content },
  })
  return tests
}

/**
 * The tests: several per changed path, each behind the task's guard (see guardOf). Nothing is
 * tested on its own that the untouched workdir already satisfies: such a test pays an agent for
 * doing nothing, more than for a wrong attempt that leaves a stray file, and RL on the dense
 * reward then drifts towards replies that run nothing (issue 14, session 10).
 */
const testsFor = (before: Tree, after: Tree): Array<LadderTest> => {
  const tests: Array<LadderTest> = []
  for (const path of sortedPaths(after)) {
    const entry = after.get(path) as Entry
    const old = before.get(path)
    if (entry.kind === "dir") {
      if (old?.kind === "dir") continue
      const s = slug(path)
      tests.push({
        name: `${s}_is_folder`,
        doc: `${path} is a folder`,
        check: { kind: "isDir", path },
      })
      if (!sortedPaths(after).some((p) => p.startsWith(`${path}/`)))
        tests.push({
          name: `${s}_is_empty`,
          doc: `the folder ${path} is empty`,
          check: { kind: "emptyDir", path },
        })
      continue
    }
    if (old?.kind === "file" && old.content === entry.content) continue
    tests.push(...fileTests(path, entry, old === undefined))
  }
  for (const path of sortedPaths(before))
    if (!after.has(path))
      tests.push({
        name: `${slug(path)}_is_gone`,
        doc: `${path} no longer exists`,
        check: { kind: "gone", path },
      })
  return tests
}

/**
 * The guard, run before every test (a failed guard fails the test): the files the task leaves
 * alone are unchanged, and the workdir holds no path that no stage of the task (before, after
 * each step) has. A stray file or a clobbered one fails every test; each partial stage of a
 * multi-step task passes the guard, so every step done right still earns its own tests; with the
 * tests passing, the workdir is exactly what the task asks for.
 */
const guardOf = (before: Tree, after: Tree, staged: ReadonlySet<string>): LadderGuard => {
  const kept: Record<string, string> = {}
  for (const path of sortedPaths(after)) {
    const entry = after.get(path) as Entry
    const old = before.get(path)
    if (entry.kind === "file" && old?.kind === "file" && old.content === entry.content)
      kept[path] = entry.content
  }
  return { kept, allowed: [...staged].sort() }
}

/** The agent timeout of a ladder task: a few one-line commands. */
export const LADDER_AGENT_TIMEOUT_SEC = 120

/** A ladder task before its tests are rendered in a language (ladder-checks.ts). */
export interface LadderPlan {
  readonly instruction: string
  readonly setup: string
  readonly solution: string
  readonly tests: ReadonlyArray<LadderTest>
  readonly guard: LadderGuard
  readonly bindings: TaskBindings
}

/**
 * Plans a ladder task: `build` draws names from `draw` and returns the steps in order; then
 * distractor files are added by difficulty (easy 1, medium 2, hard 2 plus a trap named like the
 * task's first file with another extension).
 */
export const ladderPlan = (
  rng: Rng,
  difficulty: Difficulty,
  pool: Pool,
  build: (draw: Draw) => ReadonlyArray<Step>,
  hiddenSalt?: string,
): LadderPlan => {
  const draw = new Draw(rng, pool, hiddenSalt)
  const steps = build(draw)
  draw.distractors(difficulty, draw.bindings.files[0])
  const before: Tree = new Map()
  for (const dir of draw.initialDirs) before.set(dir, { kind: "dir" })
  for (const [path, content] of draw.initialFiles)
    before.set(path, { kind: "file", content, made: { by: "setup" } })
  const after: Tree = new Map(before)
  // Every path of every stage: a partial stage (a file written before it is moved) is no stray.
  const staged = new Set(before.keys())
  for (const step of steps) {
    step.apply(after)
    for (const path of after.keys()) staged.add(path)
  }
  const files = [...draw.initialFiles].map(([path, content]) => ({ path, content }))
  return {
    instruction: steps.map((s) => s.sentence).join("\n"),
    setup: bashScript([
      ...(draw.initialDirs.length > 0 ? [`mkdir -p ${draw.initialDirs.join(" ")}`] : []),
      ...createFiles(files),
    ]),
    solution: bashScript(
      steps.flatMap((s) => (s.look === undefined ? [] : [s.look]).concat(s.command)),
    ),
    tests: testsFor(before, after),
    guard: guardOf(before, after, staged),
    bindings: {
      files: [...draw.bindings.files],
      dirs: [...draw.bindings.dirs],
      words: [...draw.bindings.words],
      values: [...draw.bindings.values],
    },
  }
}

/** The task as written: its tests a bash script with a CTRF report (tests/test.sh). */
export const ladderTask = (plan: LadderPlan): GeneratedTask => ({
  instruction: plan.instruction,
  setup: plan.setup,
  solution: plan.solution,
  ...ladderBash(plan.tests, plan.guard),
  testsFormat: "script",
  agentTimeoutSec: LADDER_AGENT_TIMEOUT_SEC,
  bindings: plan.bindings,
})
