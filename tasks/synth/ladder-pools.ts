/**
 * The names and values of the ladder families (families/ladder.ts), split into a train pool and a
 * disjoint eval pool.
 *
 * The policy is small and its tokenizer byte-level: a name it must copy from the instruction into
 * a command should be a few common tokens, and every token of an eval name must have been a
 * training target somewhere (the policy's output layer is not tied to its input embedding, so a
 * token never produced in training is never produced at eval). Hence one word list whose words
 * are single tokens (with their leading space) in the bundled tokenizer, used in every role, and
 * eval pools that hold out *combinations* rather than tokens:
 *
 * - files `<word>.<ext>`: a (word, ext) pair is eval when (word index + ext index) is odd, so every
 *   word has two train and two eval extensions, and no eval file name occurs in train;
 * - folders `<word>`: eval when the word index is 1 mod 4 (these words occur in train only as
 *   file stems and grep words);
 * - grep words: eval when the word index is 3 mod 4;
 * - values (integers written into files): eval when 2 mod 4.
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

/** Extensions; each is one token after the dot. */
export const LADDER_EXTS: ReadonlyArray<string> = ["txt", "log", "md", "csv"]

export const LADDER_VALUE_RANGE = { min: 10, max: 99 } as const

/** A pool's names: files are `<stem>.<ext>`, grouped by stem so that a trap can share one. */
export interface NamePool {
  readonly pool: Pool
  /** stem -> the extensions this pool may use with it. */
  readonly files: ReadonlyMap<string, ReadonlyArray<string>>
  readonly dirs: ReadonlyArray<string>
  readonly words: ReadonlyArray<string>
  readonly values: ReadonlyArray<string>
}

const side = (evalSide: boolean): Pool => (evalSide ? "eval" : "train")

const build = (pool: Pool): NamePool => {
  const files = new Map<string, ReadonlyArray<string>>()
  LADDER_WORDS.forEach((word, i) => {
    files.set(
      word,
      LADDER_EXTS.filter((_, j) => side((i + j) % 2 === 1) === pool),
    )
  })
  const values: Array<string> = []
  for (let n = LADDER_VALUE_RANGE.min; n <= LADDER_VALUE_RANGE.max; n++)
    if (side(n % 4 === 2) === pool) values.push(String(n))
  return {
    pool,
    files,
    dirs: LADDER_WORDS.filter((_, i) => side(i % 4 === 1) === pool),
    words: LADDER_WORDS.filter((_, i) => side(i % 4 === 3) === pool),
    values,
  }
}

const POOLS: Readonly<Record<Pool, NamePool>> = { train: build("train"), eval: build("eval") }

export const namePool = (pool: Pool): NamePool => POOLS[pool]

/** Every file name of a pool, `<stem>.<ext>`. */
export const poolFileNames = (pool: NamePool): Array<string> =>
  [...pool.files].flatMap(([stem, exts]) => exts.map((ext) => `${stem}.${ext}`))

/**
 * Words for the lines inside files (never in an instruction): none contains a ladder word or is
 * contained in one, so that `grep <word>` matches exactly the lines given the word.
 */
export const CONTENT_WORDS: ReadonlyArray<string> = [...ADJECTIVES, ...VERBS].filter(
  (w) => !LADDER_WORDS.some((l) => l.includes(w) || w.includes(l)),
)
