export { ContinuousBatcher } from "./batcher.ts"
export { KvCache } from "./cache.ts"
export {
  DEFAULT_CONFIG,
  headDim,
  kvHeads,
  kvWidth,
  ModelConfigError,
  queryWidth,
  type TinyMoeConfig,
  validateConfig,
} from "./config.ts"
export type { ForwardOptions, ForwardResult, Row, Tape } from "./forward.ts"
export {
  type Generated,
  type GenerateRequest,
  generateBatch,
  type SamplingParams,
  type StopReason as GenerationStopReason,
} from "./generate.ts"
export {
  CRITIC_TENSORS,
  criticTensorSpecs,
  fromHfConfig,
  HF_ARCHITECTURE,
  HF_MODEL_TYPE,
  type HfSpecialTokens,
  type HfTensorSpec,
  hfTensorSpecs,
  toHfConfig,
} from "./hf.ts"
export {
  type CheckpointTensors,
  type HfCheckpoint,
  INDEX_FILE,
  type ReadHfOptions,
  readCheckpointTensors,
  readHfCheckpoint,
  SINGLE_FILE,
} from "./hf-dir.ts"
export { tokenLogprobs, weightedNll } from "./losses.ts"
export { type CreateOptions, TinyMoe } from "./model.ts"
export {
  closeGradientWorkers,
  gradientWorkerCount,
  type Threads,
} from "./parallel.ts"
export {
  countParams,
  initParams,
  mapParams,
  type ParamEntry,
  type Params,
  type Precision,
  paramEntries,
  zerosLike,
} from "./params.ts"
export { PrefixCache } from "./prefix.ts"
export { allocRouting, type Routing } from "./routing.ts"
export { Sequence } from "./sequence.ts"
export {
  addGrads,
  type GradientOptions,
  optimizerFor,
  type SupervisedSequence,
  supervisedGradients,
  supervisedStep,
} from "./train.ts"
export {
  checkTensor,
  configMismatch,
  type DecodedWeights,
  type DecodeOptions,
  decodeWeights,
  encodeWeights,
  type StoredDtype,
  WEIGHTS_FORMAT,
  type WeightsMetadata,
} from "./weights.ts"
