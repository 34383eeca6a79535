/**
 * The names and values of the ladder families (families/ladder.ts), split into a train pool, a
 * disjoint eval pool and a demo pool inside the train pool.
 *
 * A name is a ladder word and a digit, `delta3`: two tokens in the bundled tokenizer (` delta`,
 * `3`), each a single token the policy produces in training. The policy's output layer is not
 * tied to its input embedding, so a token never produced in training is never produced at eval;
 * held-out names are therefore unseen *pairs*: (word i, digit d) is an eval name when
 * (3i + d) mod 5 = 0, two digits per word. Every name plays every role (file stem, folder, grep
 * word, value), so nothing but the instruction says which name goes where: the policy has to
 * copy it.
 *
 * Measured (exp:toy, issue 14): with single-word names and eval pools holding out (word, role)
 * pairs, the 2-layer policy filled a command's slots by which roles each word had in training
 * ("Add the line backup to delta.txt." -> `echo delta >> backup.txt`), RL sharpened that on train
 * names and the held-out rate did not move (28% -> 25% over 300 updates). With word+digit names
 * the same warm start copies (45% held-out) and RL lifts it (58% after 100 updates).
 *
 * Every file has the one extension `.txt`; a hard task's trap is the same stem with `.log`, a
 * name that appears in no instruction and no command.
 */
import type { Pool } from "./family.ts"
import { ADJECTIVES, VERBS } from "./vocabulary.ts"

/** Single tokens (" anchor", " archive", …) in model/bundled/tokenizer.json; none is a template word. */
export const LADDER_WORDS: ReadonlyArray<string> = [
  "anchor",
  "archive",
  "audit",
  "backup",
  "delta",
  "docs",
  "feather",
  "header",
  "incoming",
  "jasper",
  "lemon",
  "marble",
  "order",
  "otter",
  "photos",
  "project",
  "region",
  "release",
  "site",
  "thistle",
  "timber",
  "user",
]

/** The extension of every ladder file, and of the hard tier's trap (one token after the dot). */
export const LADDER_EXT = "txt"
export const LADDER_TRAP_EXT = "log"

/** The digit after a ladder word in a name: `delta3` is the tokens ` delta` and `3`. */
export const LADDER_DIGITS: ReadonlyArray<string> = [
  "0",
  "1",
  "2",
  "3",
  "4",
  "5",
  "6",
  "7",
  "8",
  "9",
]

/** Whether the name of word `index` and digit `digit` is an eval name: one pair in five. */
export const evalPair = (index: number, digit: number): boolean => (3 * index + digit) % 5 === 0

/** Whether the pair is a train name that demonstrations never use: another one pair in five. */
export const rlOnlyPair = (index: number, digit: number): boolean => (3 * index + digit) % 5 === 1

/** Whether the name of word `index` and digit `digit` belongs to `pool`. */
export const inPool = (index: number, digit: number, pool: Pool): boolean =>
  pool === "eval"
    ? evalPair(index, digit)
    : !evalPair(index, digit) && (pool === "train" || !rlOnlyPair(index, digit))

/** A pool's names, `<word><digit>`, used in every role: file stems, folders, grep words, values. */
export interface NamePool {
  readonly pool: Pool
  readonly names: ReadonlyArray<string>
}

const build = (pool: Pool): NamePool => ({
  pool,
  names: LADDER_WORDS.flatMap((word, i) =>
    LADDER_DIGITS.filter((_, d) => inPool(i, d, pool)).map((d) => `${word}${d}`),
  ),
})

const POOLS: Readonly<Record<Pool, NamePool>> = {
  demo: build("demo"),
  train: build("train"),
  eval: build("eval"),
}

export const namePool = (pool: Pool): NamePool => POOLS[pool]

/** The ladder word a name is made of: `delta3` -> `delta`. */
export const nameWord = (name: string): string => name.replace(/[0-9]+$/, "")

/** Every file name of a pool, `<name>.txt`. */
export const poolFileNames = (pool: NamePool): Array<string> =>
  pool.names.map((name) => `${name}.${LADDER_EXT}`)

/**
 * Words for the lines inside files (never in an instruction): none contains a ladder word or is
 * contained in one, so that `grep <word>` matches exactly the lines given the word.
 */
export const CONTENT_WORDS: ReadonlyArray<string> = [...ADJECTIVES, ...VERBS].filter(
  (w) => !LADDER_WORDS.some((l) => l.includes(w) || w.includes(l)),
)
