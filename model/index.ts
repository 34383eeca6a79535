export type { Floats, Kernels } from "./kernels/kernels.ts"
export { referenceKernels } from "./kernels/reference.ts"
export {
  logprobOf,
  type RowNormaliser,
  rowLogprob,
  rowNormaliser,
  rowNormaliserWithExps,
} from "./logprob.ts"
export * from "./moe/index.ts"
export * from "./optim/index.ts"
export { Rng } from "./rng.ts"
export {
  checkStop,
  logSoftmax,
  type SampledToken,
  SamplingError,
  type StopCriteria,
  sampleToken,
} from "./sample/index.ts"
export * from "./template/index.ts"
export * from "./tokenizer/index.ts"
export * from "./weights/index.ts"
