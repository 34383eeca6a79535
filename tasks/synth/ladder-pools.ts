/**
 * The names and values of the ladder families (families/ladder.ts), split into a train pool and a
 * disjoint eval pool.
 *
 * The policy is small and its tokenizer byte-level: a name it must copy from the instruction into
 * a command is one token (with its leading space) in the bundled tokenizer, and every token of an
 * eval name must have been a training target somewhere (the policy's output layer is not tied to
 * its input embedding, so a token never produced in training is never produced at eval). Hence one
 * word list used in every role — file stem, folder, grep word and value — and eval pools that hold
 * out *(word, role)* pairs rather than tokens: word i is an eval name in role i mod 4 and a train
 * name in the three other roles. An eval file stem has been produced in train only as a folder, a
 * grep word or a value, never after `touch` or `cp`; the policy has to copy it from the
 * instruction, it cannot recall it.
 *
 * Measured (scratch runs of the warm start, issue 14): with file names `<word>.<ext>` and eval
 * pools holding out (word, ext) pairs, a 2-layer policy learnt each word's train extensions and
 * never copied an unseen pair (5% held-out after 1200 SFT steps on 600 demonstrations, the
 * successes all `mkdir`), so every file has the one extension `.txt`; a hard task's trap is the
 * same stem with `.log`, a name that appears in no instruction and no command.
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

/** The roles a ladder word plays; word i is an eval name in role i mod 4. */
export const LADDER_ROLES = ["file", "dir", "word", "value"] as const
export type LadderRole = (typeof LADDER_ROLES)[number]

/** A pool's names: files are `<stem>.txt`; a trap is `<stem>.log`. */
export interface NamePool {
  readonly pool: Pool
  /** File stems. */
  readonly stems: ReadonlyArray<string>
  readonly dirs: ReadonlyArray<string>
  readonly words: ReadonlyArray<string>
  readonly values: ReadonlyArray<string>
}

/** Whether word `index` is an eval name in `role`. */
export const evalRole = (index: number, role: LadderRole): boolean =>
  index % LADDER_ROLES.length === LADDER_ROLES.indexOf(role)

/**
 * Whether word `index` is a train name in `role` that demonstrations never use: word i is kept
 * out of the demo pool in role (i + 2) mod 4, so every word keeps two demo roles, one role that
 * only RL meets, and its eval role.
 */
export const rlOnlyRole = (index: number, role: LadderRole): boolean =>
  (index + 2) % LADDER_ROLES.length === LADDER_ROLES.indexOf(role)

/** Whether word `index` is a name of `pool` in `role`. */
export const inPool = (index: number, role: LadderRole, pool: Pool): boolean =>
  pool === "eval"
    ? evalRole(index, role)
    : !evalRole(index, role) && (pool === "train" || !rlOnlyRole(index, role))

const build = (pool: Pool): NamePool => {
  const words = (role: LadderRole) => LADDER_WORDS.filter((_, i) => inPool(i, role, pool))
  return {
    pool,
    stems: words("file"),
    dirs: words("dir"),
    words: words("word"),
    values: words("value"),
  }
}

const POOLS: Readonly<Record<Pool, NamePool>> = {
  demo: build("demo"),
  train: build("train"),
  eval: build("eval"),
}

export const namePool = (pool: Pool): NamePool => POOLS[pool]

/** Every file name of a pool, `<stem>.txt`. */
export const poolFileNames = (pool: NamePool): Array<string> =>
  pool.stems.map((stem) => `${stem}.${LADDER_EXT}`)

/**
 * Words for the lines inside files (never in an instruction): none contains a ladder word or is
 * contained in one, so that `grep <word>` matches exactly the lines given the word.
 */
export const CONTENT_WORDS: ReadonlyArray<string> = [...ADJECTIVES, ...VERBS].filter(
  (w) => !LADDER_WORDS.some((l) => l.includes(w) || w.includes(l)),
)
