export {
  bf16BitsToF32,
  bf16Round,
  DTYPE_BYTES,
  type Dtype,
  type DtypeArrays,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  isDtype,
  type Tensor,
} from "./dtypes.ts"
export { SafetensorsError } from "./errors.ts"
export { readSafetensorsFile, writeSafetensorsFile } from "./file.ts"
export {
  type CheckpointFile,
  CRITIC_FILE,
  type HfCheckpointOptions,
  hfCheckpointFiles,
} from "./hf-checkpoint.ts"
export {
  decodeSafetensors,
  encodeSafetensors,
  MAX_HEADER_BYTES,
  type Safetensors,
} from "./safetensors.ts"
