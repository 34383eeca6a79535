/**
 * A Hugging Face model directory as a GPU user would launch an engine on: a TinyMoE (a small
 * Qwen3-MoE) exported with the bundled tokenizer, its tokenizer_config.json (chat template,
 * eos_token) and generation_config.json. For tests of `t1 serve --policy sglang --model-dir`.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { bundledExportOptions, loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { encodeWeights, hfCheckpointFiles, TinyMoe } from "../../model/index.ts"

export interface ModelDir {
  readonly dir: string
  /** The id that ends an assistant turn (eos_token). */
  readonly eosId: number
  /** Token ids of `text` in the directory's tokenizer. */
  readonly encode: (text: string) => number[]
}

export const writeModelDir = (dir: string, seed = 0): ModelDir => {
  const tokenizer = loadBundledTokenizer()
  const model = TinyMoe.create({ config: { vocabSize: tokenizer.vocabSize }, seed })
  const files = hfCheckpointFiles(
    encodeWeights(model, "F32", { version: 0n }),
    bundledExportOptions(),
  )
  for (const file of files) {
    mkdirSync(dirname(join(dir, file.name)), { recursive: true })
    writeFileSync(join(dir, file.name), file.bytes)
  }
  return {
    dir,
    eosId: tokenizer.specialId("<|end|>"),
    encode: (t) => [...tokenizer.encode(t)],
  }
}
