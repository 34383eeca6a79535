/**
 * The ladder families: file tasks of one, two or three one-line commands, for a policy too small
 * for the multi-step families (tasks/ladder). Rung 1 is one command whose arguments all come
 * from the instruction; rungs 2 and 3 chain those same steps, each written exactly as its
 * one-step task writes it. Names and values come from the pool the seed selects
 * (ladder-pools.ts): train seeds and eval seeds never share a name or a value.
 */
import type { Difficulty, GenerateContext, GeneratedTask, TaskFamily } from "../family.ts"
import {
  append,
  copy,
  copyInto,
  count,
  type Draw,
  grep,
  type LadderPlan,
  ladderPlan,
  ladderTask,
  mkdir,
  moveInto,
  remove,
  rename,
  type Step,
  touch,
  write,
} from "../ladder-world.ts"
import type { Rng } from "../rng.ts"

/** A ladder family; `plan` is the task before its tests are rendered (for tests of the tests). */
export interface LadderFamily extends TaskFamily {
  /** 1–3: that many commands; 5–7: observation rungs (ladder-observe.ts). */
  readonly rung: 1 | 2 | 3 | 5 | 6 | 7
  readonly plan: (rng: Rng, difficulty: Difficulty, context?: GenerateContext) => LadderPlan
}

const family = (
  name: string,
  rung: 1 | 2 | 3,
  summary: string,
  build: (draw: Draw) => ReadonlyArray<Step>,
): LadderFamily => {
  const plan = (rng: Rng, difficulty: Difficulty, context?: GenerateContext) =>
    ladderPlan(rng, difficulty, context?.pool ?? "train", build)
  return {
    name,
    summary,
    tags: ["file-ops", "ladder", `rung-${rung}`],
    rung,
    plan,
    generate: (rng: Rng, difficulty: Difficulty, context?: GenerateContext): GeneratedTask =>
      ladderTask(plan(rng, difficulty, context)),
  }
}

export const LADDER_RUNG_1: ReadonlyArray<LadderFamily> = [
  family("make-file", 1, "create a named empty file (touch)", (d) => [touch(d.newFile())]),
  family("make-dir", 1, "make a named folder (mkdir)", (d) => [mkdir(d.newDir())]),
  family("write-file", 1, "write a value into a named new file (echo >)", (d) => [
    write(d.newFile(), d.value()),
  ]),
  family("append-line", 1, "add a line to the end of a named file (echo >>)", (d) => [
    append(d.source(), d.value()),
  ]),
  family("copy-file", 1, "copy a named file to a new name (cp)", (d) => [
    copy(d.source(), d.newFile()),
  ]),
  family("rename-file", 1, "rename a named file (mv)", (d) => [rename(d.source(), d.newFile())]),
  family("delete-file", 1, "delete a named file (rm)", (d) => [remove(d.source())]),
  family("count-lines", 1, "write the line count of a named file into a file (wc -l)", (d) => [
    count(d.source(), d.newFile()),
  ]),
  family(
    "grep-lines",
    1,
    "write the lines of a file that contain a word into a file (grep)",
    (d) => {
      const word = d.grepWord()
      return [grep(word, d.source(word), d.newFile())]
    },
  ),
  family("copy-into-dir", 1, "copy a named file into an existing folder (cp)", (d) => [
    copyInto(d.source(), d.existingDir()),
  ]),
  family("move-into-dir", 1, "move a named file into an existing folder (mv)", (d) => [
    moveInto(d.source(), d.existingDir()),
  ]),
]

export const LADDER_RUNG_2: ReadonlyArray<LadderFamily> = [
  family("dir-then-copy", 2, "make a folder, then copy a file into it", (d) => {
    const dir = d.newDir()
    return [mkdir(dir), copyInto(d.source(), dir)]
  }),
  family("dir-then-move", 2, "make a folder, then move a file into it", (d) => {
    const dir = d.newDir()
    return [mkdir(dir), moveInto(d.source(), dir)]
  }),
  family("write-then-append", 2, "write a value into a new file, then add a line", (d) => {
    const file = d.newFile()
    return [write(file, d.value()), append(file, d.value())]
  }),
  family("copy-then-append", 2, "copy a file, then add a line to the copy", (d) => {
    const from = d.source()
    const to = d.newFile()
    return [copy(from, to), append(to, d.value())]
  }),
  family("backup-then-write", 2, "copy a file to a backup, then overwrite it", (d) => {
    const from = d.source()
    const to = d.newFile()
    return [copy(from, to), write(from, d.value())]
  }),
  family("grep-then-count", 2, "grep a word into a file, then count its lines", (d) => {
    const word = d.grepWord()
    const from = d.source(word)
    const hits = d.newFile()
    return [grep(word, from, hits), count(hits, d.newFile())]
  }),
  family("rename-then-append", 2, "rename a file, then add a line to it", (d) => {
    const from = d.source()
    const to = d.newFile()
    return [rename(from, to), append(to, d.value())]
  }),
]

export const LADDER_RUNG_3: ReadonlyArray<LadderFamily> = [
  family("dir-move-delete", 3, "make a folder, move a file into it, delete another", (d) => {
    const dir = d.newDir()
    const moved = d.source()
    return [mkdir(dir), moveInto(moved, dir), remove(d.source())]
  }),
  family(
    "grep-count-delete",
    3,
    "grep a word into a file, count its lines, delete the source",
    (d) => {
      const word = d.grepWord()
      const from = d.source(word)
      const hits = d.newFile()
      return [grep(word, from, hits), count(hits, d.newFile()), remove(from)]
    },
  ),
  family("backup-write-append", 3, "back a file up, overwrite it, then add a line", (d) => {
    const from = d.source()
    const to = d.newFile()
    return [copy(from, to), write(from, d.value()), append(from, d.value())]
  }),
  family("copy-append-count", 3, "copy a file, add a line to the copy, count its lines", (d) => {
    const from = d.source()
    const to = d.newFile()
    return [copy(from, to), append(to, d.value()), count(to, d.newFile())]
  }),
  family("dir-write-move", 3, "write a value into a new file, make a folder, move it in", (d) => {
    const file = d.newFile()
    const value = d.value()
    const dir = d.newDir()
    return [write(file, value), mkdir(dir), moveInto(file, dir)]
  }),
]

/** Every ladder family, rung by rung. */
export const LADDER_FAMILIES: ReadonlyArray<LadderFamily> = [
  ...LADDER_RUNG_1,
  ...LADDER_RUNG_2,
  ...LADDER_RUNG_3,
]
