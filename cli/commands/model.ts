import { readFile, stat, writeFile } from "node:fs/promises"
import { Effect } from "effect"
import { saveTokenizerJson, trainTokenizer } from "../../model/index.ts"
import { intFlag, parseFlags, UsageError } from "../flags.ts"

export const modelUsage =
  () => `Usage: t1 model train-tokenizer --corpus FILE[,FILE…] --out tokenizer.json [options]

Trains a byte-level BPE tokenizer (GPT-2 byte alphabet and pre-tokenisation, the chat special
tokens <|system|> <|user|> <|assistant|> <|tool|> <|end|> <|pad|>) and writes it in the Hugging
Face tokenizer.json format, which t1 loads like any real model's tokenizer.

Options:
  --corpus FILES        UTF-8 text files to learn from (comma-separated)
  --out FILE            where to write tokenizer.json
  --vocab-size N        upper bound on the vocabulary, special tokens included (default 4096)
  --min-frequency N     a pair must occur this often to be merged (default 2)`

const spec = {
  corpus: { type: "string" },
  out: { type: "string" },
  "vocab-size": { type: "string" },
  "min-frequency": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const

export const modelCommand = (
  args: ReadonlyArray<string>,
): Effect.Effect<void, unknown> | string => {
  const usage = modelUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  const [action, ...rest] = positionals
  if (action !== "train-tokenizer") {
    throw new UsageError(
      action === undefined
        ? "which action? train-tokenizer"
        : `unknown action ${JSON.stringify(action)}`,
      usage,
    )
  }
  if (rest.length > 0) throw new UsageError(`unexpected arguments: ${rest.join(" ")}`, usage)
  if (values.corpus === undefined || values.corpus === "")
    throw new UsageError("--corpus is required", usage)
  if (values.out === undefined || values.out === "")
    throw new UsageError("--out is required", usage)
  const vocabSize = intFlag("vocab-size", values["vocab-size"], 4096, usage, 263)
  const minFrequency = intFlag("min-frequency", values["min-frequency"], 2, usage, 1)
  const files = values.corpus.split(",").filter((f) => f !== "")
  const out = values.out
  return Effect.gen(function* () {
    const texts = yield* Effect.forEach(files, (file) =>
      Effect.tryPromise({
        try: async () => {
          if (!(await stat(file)).isFile()) throw new Error("not a file")
          return new TextDecoder("utf-8", { fatal: true }).decode(await readFile(file))
        },
        catch: (e) => new Error(`--corpus ${file}: ${e instanceof Error ? e.message : String(e)}`),
      }),
    )
    const started = Date.now()
    const tokenizer = yield* Effect.try({
      try: () => trainTokenizer(texts, { vocabSize, minFrequency }),
      catch: (e) => (e instanceof Error ? e : new Error(String(e))),
    })
    yield* Effect.tryPromise({
      try: () => writeFile(out, saveTokenizerJson(tokenizer)),
      catch: (e) => new Error(`--out ${out}: ${String(e)}`),
    })
    const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t), 0)
    console.log(
      `trained ${tokenizer.vocabSize} tokens on ${bytes} bytes in ${Date.now() - started} ms → ${out}`,
    )
  })
}
