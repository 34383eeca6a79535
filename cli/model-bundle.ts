/**
 * Regenerates the embedded default's tokenizer from the bundled training tasks (instructions,
 * reference solutions as shell-block turns, tests) and the action formats' prompts, with its
 * tokenizer_config.json (chat template) and generation_config.json: `npm run model:bundle`. Deterministic: the same inputs give the same tokenizer.json.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { SHELL_BLOCK_PROMPT, shellBlock } from "../actors/sampler/index.ts"
import {
  BUNDLED_GENERATION_CONFIG,
  BUNDLED_TOKENIZER,
  BUNDLED_TOKENIZER_CONFIG,
  bundledTokenizerConfigs,
  DONE_TOKEN,
} from "../model/bundled/bundled.ts"
import {
  CHAT_SPECIAL_TOKENS,
  loadTokenizerJson,
  saveTokenizerJson,
  trainTokenizer,
} from "../model/tokenizer/index.ts"

const TRAIN = join(import.meta.dirname, "../tasks/bundled/train")

export const bundledTokenizerJson = (): { json: string; vocabSize: number; texts: number } => {
  const corpus: string[] = [SHELL_BLOCK_PROMPT]
  for (const name of readdirSync(TRAIN).sort()) {
    const dir = join(TRAIN, name)
    const read = (path: string) => {
      try {
        return readFileSync(join(dir, path), "utf8")
      } catch {
        return ""
      }
    }
    corpus.push(read("instruction.md"), read("setup.sh"), read("tests/test_outputs.py"))
    const solution = read("solution/solve.sh")
    if (solution) corpus.push(solution, ...shellBlock.renderSolution(solution))
  }
  const tokenizer = trainTokenizer(corpus, {
    vocabSize: 1024,
    specialTokens: [...CHAT_SPECIAL_TOKENS, DONE_TOKEN],
  })
  return {
    json: `${saveTokenizerJson(tokenizer)}\n`,
    vocabSize: tokenizer.vocabSize,
    texts: corpus.length,
  }
}

if (process.argv[1] === import.meta.filename) {
  const { json, vocabSize, texts } = bundledTokenizerJson()
  writeFileSync(BUNDLED_TOKENIZER, json)
  const configs = bundledTokenizerConfigs(loadTokenizerJson(json))
  writeFileSync(BUNDLED_TOKENIZER_CONFIG, configs.tokenizerConfig)
  writeFileSync(BUNDLED_GENERATION_CONFIG, configs.generationConfig)
  console.log(
    `wrote ${BUNDLED_TOKENIZER}: ${vocabSize} ids from ${texts} texts, and its tokenizer_config.json and generation_config.json`,
  )
}
