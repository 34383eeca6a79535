export { SamplingError } from "./errors.ts"
export {
  type Logits,
  logSoftmax,
  type RandomSource,
  type SampledToken,
  type SamplingParams,
  sampleToken,
} from "./sample.ts"
export { checkStop, type StopCriteria, type StopReason } from "./stop.ts"
