/**
 * The ladder's observation rungs: tasks whose needed value is only in the sandbox (see
 * ../ladder-observe.ts). Rung 5: one look, then one act (two commands). Rung 6: two such steps
 * (four). Rung 7: a chain of three to five, drawn at random from every observation step (six to
 * ten). Each step changes its own paths, so the dense reward pays every step done right.
 */
import type { Difficulty, GenerateContext, GeneratedTask } from "../family.ts"
import {
  countEcho,
  emptyDelete,
  findCopy,
  OBSERVE_STEPS,
  type ObserveStep,
  observeChain,
  pointerCopy,
  pointerMove,
  readAppend,
} from "../ladder-observe.ts"
import { type LadderPlan, ladderPlan, ladderTask } from "../ladder-world.ts"
import type { Rng } from "../rng.ts"
import type { LadderFamily } from "./ladder.ts"

/** The observation rungs, and the rung of each. */
export const OBSERVE_RUNGS = [5, 6, 7] as const
export type ObserveRung = (typeof OBSERVE_RUNGS)[number]

/** The tag every observation family carries beside `rung-<n>`. */
export const OBSERVE_TAG = "observe"

const family = (
  name: string,
  rung: ObserveRung,
  summary: string,
  steps: (rng: Rng, difficulty: Difficulty) => ReadonlyArray<ObserveStep>,
): LadderFamily => {
  const plan = (rng: Rng, difficulty: Difficulty, context?: GenerateContext): LadderPlan =>
    ladderPlan(
      rng,
      difficulty,
      context?.pool ?? "train",
      (d) => observeChain(d, steps(rng, difficulty)),
      context?.hiddenSalt,
    )
  return {
    name,
    summary,
    tags: ["file-ops", "ladder", OBSERVE_TAG, `rung-${rung}`],
    rung,
    plan,
    generate: (rng: Rng, difficulty: Difficulty, context?: GenerateContext): GeneratedTask =>
      ladderTask(plan(rng, difficulty, context)),
  }
}

const one = (step: ObserveStep) => () => [step]

export const LADDER_RUNG_5: ReadonlyArray<LadderFamily> = [
  family(
    "pointer-move",
    5,
    "a file names a file in a folder; move it (cat → mv)",
    one(pointerMove),
  ),
  family(
    "empty-delete",
    5,
    "delete the one empty file of a folder (find -empty → rm)",
    one(emptyDelete),
  ),
  family("pointer-copy", 5, "a file holds a path; copy that file (cat → cp)", one(pointerCopy)),
  family("find-copy", 5, "copy the file some folder holds (find -name → cp)", one(findCopy)),
  family("count-echo", 5, "write a file's line count with echo (wc -l → echo)", one(countEcho)),
  family("read-append", 5, "add the word a file holds to another (cat → echo >>)", one(readAppend)),
]

export const LADDER_RUNG_6: ReadonlyArray<LadderFamily> = [
  family("move-then-delete", 6, "follow a pointer and move, then delete an empty file", () => [
    pointerMove,
    emptyDelete,
  ]),
  family("find-then-append", 6, "copy a found file, then add a word read from a file", () => [
    findCopy,
    readAppend,
  ]),
  family("count-then-copy", 6, "write a line count, then copy the file a pointer names", () => [
    countEcho,
    pointerCopy,
  ]),
  family("delete-then-count", 6, "delete an empty file, then write a line count", () => [
    emptyDelete,
    countEcho,
  ]),
]

const CHAIN_LENGTH: Readonly<Record<Difficulty, number>> = { easy: 3, medium: 4, hard: 5 }

/** The most commands a reference of each observation rung runs: a look and an act a step. */
export const OBSERVE_RUNG_COMMANDS: Readonly<Record<ObserveRung, number>> = {
  5: 2,
  6: 4,
  7: 2 * Math.max(...Object.values(CHAIN_LENGTH)),
}

export const LADDER_RUNG_7: ReadonlyArray<LadderFamily> = [
  family(
    "look-chain",
    7,
    "three to five observation steps drawn at random (6–10 commands)",
    (rng, difficulty) =>
      Array.from({ length: CHAIN_LENGTH[difficulty] }, () =>
        rng.pick(Object.values(OBSERVE_STEPS)),
      ),
  ),
]

/** Every observation family, rung by rung. */
export const LADDER_OBSERVE_FAMILIES: ReadonlyArray<LadderFamily> = [
  ...LADDER_RUNG_5,
  ...LADDER_RUNG_6,
  ...LADDER_RUNG_7,
]
