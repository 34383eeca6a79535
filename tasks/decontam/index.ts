export {
  type DecontamOptions,
  type DecontamReport,
  decontaminate,
  type FieldOverlaps,
  formatReport,
  type TaskOverlap,
} from "./decontaminate.ts"
export { ContaminationFound, TaskReadFailed } from "./errors.ts"
export { ngrams, tokenize } from "./ngrams.ts"
export { readTaskSet, seedOfId, type TaskTexts, taskTexts } from "./read.ts"
export {
  checkSplits,
  type FamilySplit,
  SEED_RANGES,
  type Split,
  type SplitCheck,
  seedSplit,
  splitFamilies,
  splitSeed,
} from "./splits.ts"
