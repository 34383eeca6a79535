export { TaskWriteFailed, UnknownFamily } from "./errors.ts"
export {
  ALL_FAMILIES,
  FAMILIES,
  familyRegistry,
  LADDER_FAMILIES,
  LADDER_OBSERVE_FAMILIES,
  LADDER_RUNG_1,
  LADDER_RUNG_2,
  LADDER_RUNG_3,
  LADDER_RUNG_5,
  LADDER_RUNG_6,
  LADDER_RUNG_7,
  OBSERVE_RUNG_COMMANDS,
  OBSERVE_RUNGS,
  OBSERVE_TAG,
  type ObserveRung,
} from "./families/index.ts"
export type { LadderFamily } from "./families/ladder.ts"
export {
  DIFFICULTIES,
  type Difficulty,
  type GenerateContext,
  type GeneratedTask,
  type Pool,
  type TaskBindings,
  type TaskFamily,
} from "./family.ts"
export {
  type Check,
  type LadderGuard,
  type LadderTest,
  ladderBash,
  ladderPytest,
} from "./ladder-checks.ts"
export {
  countEcho,
  emptyDelete,
  findCopy,
  OBSERVE_STEPS,
  type ObserveStep,
  observeChain,
  pointerCopy,
  pointerMove,
  readAppend,
} from "./ladder-observe.ts"
export {
  CONTENT_WORDS,
  evalPair,
  inPool,
  LADDER_DIGITS,
  LADDER_EXT,
  LADDER_TRAP_EXT,
  LADDER_WORDS,
  type NamePool,
  namePool,
  nameWord,
  poolFileNames,
  rlOnlyPair,
} from "./ladder-pools.ts"
export { type LadderPlan, ladderPlan, ladderTask } from "./ladder-world.ts"
export { makeRng, type Rng } from "./rng.ts"
export {
  difficultyFor,
  findFamily,
  generateTask,
  poolOfSeed,
  type SynthesizedTask,
  type SynthOptions,
  synthesize,
  taskId,
} from "./synthesize.ts"
export { TASK_IMAGE, TASK_WORKDIR, type TaskMeta, taskJson, writeTask } from "./write.ts"
