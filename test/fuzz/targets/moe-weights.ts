import { decodeWeights, encodeWeights, type StoredDtype, TinyMoe } from "../../../model/index.ts"
import { ACCEPTED, type FuzzTarget, judge } from "../harness.ts"
import { mutateBytes, toHex } from "../mutate.ts"
import { type Doc, mutateDoc } from "../mutate-json.ts"
import type { Random } from "../random.ts"
import { joinSafetensors, splitSafetensors } from "../safetensors-bytes.ts"
import { mutateSafetensors } from "./safetensors.ts"

/** Small enough that a decode takes well under a millisecond. */
const CONFIG = {
  vocabSize: 8,
  dModel: 8,
  nLayers: 1,
  nHeads: 2,
  nExperts: 4,
  topK: 2,
  dFf: 8,
  maxSeqLen: 16,
}

const DTYPES: ReadonlyArray<StoredDtype> = ["F32", "BF16", "F64"]
const valid = new Map<StoredDtype, Uint8Array>()

/** The config inside `__metadata__.config` (a JSON string) mutated as a document of its own. */
const mutateConfig = (rng: Random, bytes: Uint8Array): Uint8Array => {
  const { header, data } = splitSafetensors(bytes)
  if (typeof header !== "object" || header === null || Array.isArray(header)) return bytes
  const metadata = header.__metadata__
  if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) return bytes
  const config = JSON.parse(String(metadata.config)) as Doc
  const changed = { ...metadata, config: JSON.stringify(mutateDoc(rng, config)) }
  return joinSafetensors({ ...header, __metadata__: changed }, data)
}

const weightsInput = (rng: Random): Uint8Array => {
  const bytes = valid.get(rng.pick(DTYPES)) ?? new Uint8Array(0)
  return rng.bool(0.4) ? mutateConfig(rng, bytes) : mutateSafetensors(rng, bytes)
}

export const moeWeightsTarget: FuzzTarget = {
  name: "moe weights",
  description:
    "TinyMoE safetensors (F32/BF16/F64, config in the header) → decodeWeights (model/moe)",
  setup: async () => {
    const model = TinyMoe.create({ config: CONFIG, seed: 7 })
    for (const dtype of DTYPES) valid.set(dtype, encodeWeights(model, dtype, { version: 3n }))
  },
  make: (rng) => {
    const bytes = rng.bool(0.05) ? mutateBytes(rng, rng.bytes(rng.size(64))) : weightsInput(rng)
    return {
      input: () => toHex(bytes),
      run: () =>
        judge(() => {
          decodeWeights(bytes)
          return ACCEPTED
        }),
    }
  },
}
