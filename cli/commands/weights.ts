/**
 * `t1 weights fetch JOB [--version N] --out DIR`: a job's published weights (while it runs or
 * after it ended) through JobService/FetchJobWeights, written as the Hugging Face checkpoint
 * directory an engine or `transformers` loads (shards, index, config.json; the critic apart).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { mkdir, rename, rm, writeFile } from "node:fs/promises"
import { dirname, join, resolve } from "node:path"
import { Data, Effect } from "effect"
import { bundledExportOptions } from "../../model/bundled/bundled.ts"
import {
  type CheckpointFile,
  decodeSafetensors,
  type HfCheckpointOptions,
  hfCheckpointFiles,
  loadTokenizerJson,
} from "../../model/index.ts"
import { parseFlags, UsageError } from "../flags.ts"
import {
  gatewayFlagSpec,
  gatewayFlagsHelp,
  gatewayTargetFrom,
  type Output,
  stdio,
  withGateway,
} from "../gateway-flags.ts"
import { jobIdArgument } from "./watch.ts"

export const weightsUsage =
  () => `Usage: t1 weights fetch <job-id> [--version N] --out DIR [options]

Fetches a job's published weights — any version it published, while it runs or after it ended —
and writes them to DIR as a Hugging Face checkpoint directory: model-0000i-of-0000n.safetensors
shards, model.safetensors.index.json and config.json (a Qwen3-MoE config: model_type qwen3_moe),
with t1's critic apart in critic/value_head.safetensors. DIR must not exist or be empty. A job
that published no weights, or a version it never published, fails (NOT_FOUND, exit 1).

Options:
  --version N        the version to fetch (0: the job's starting weights; default: the latest)
  --out DIR          where to write the checkpoint (required)
  --tokenizer bundled|DIR
                     add the tokenizer files, so an engine can be launched on DIR: bundled is
                     the embedded policy's (tokenizer.json, tokenizer_config.json with its chat
                     template, generation_config.json, and the token ids in config.json); DIR
                     copies tokenizer.json (required), tokenizer_config.json,
                     generation_config.json and special_tokens_map.json from a model directory.
                     A tokenizer with more ids than the model's vocab_size is refused. Default:
                     the weights and config.json only
${gatewayFlagsHelp}`

const spec = {
  ...gatewayFlagSpec,
  version: { type: "string" },
  out: { type: "string" },
  tokenizer: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const

/** The checkpoint could not be written. */
export class WeightsWriteFailed extends Data.TaggedError("WeightsWriteFailed")<{
  readonly dir: string
  readonly reason: string
}> {
  override get message(): string {
    return `--out ${this.dir}: ${this.reason}`
  }
}

/** Tokenizer files a model directory may carry beside its weights. */
const TOKENIZER_FILES = [
  "tokenizer.json",
  "tokenizer_config.json",
  "generation_config.json",
  "special_tokens_map.json",
]

/** The export options of `--tokenizer`: the bundled tokenizer's, or a model directory's files. */
const tokenizerOptions = (
  tokenizer: string | undefined,
  usage: string,
): Pick<HfCheckpointOptions, "config" | "extraFiles"> => {
  if (tokenizer === undefined) return {}
  if (tokenizer === "bundled") return bundledExportOptions()
  const dir = resolve(tokenizer)
  if (!existsSync(join(dir, "tokenizer.json")))
    throw new UsageError(`--tokenizer ${dir}: no tokenizer.json there`, usage)
  const extraFiles: CheckpointFile[] = TOKENIZER_FILES.filter((name) =>
    existsSync(join(dir, name)),
  ).map((name) => ({ name, bytes: readFileSync(join(dir, name)) }))
  return { extraFiles }
}

/** Refuses tokenizer files naming ids the model has no row for (an engine would fail on them). */
const checkTokenizerFits = (bytes: Uint8Array, extraFiles: ReadonlyArray<CheckpointFile>) => {
  const file = extraFiles.find((f) => f.name === "tokenizer.json")
  if (file === undefined) return
  const ids = loadTokenizerJson(new TextDecoder().decode(file.bytes)).vocabSize
  const config = decodeSafetensors(bytes).metadata.config
  const vocab = config === undefined ? undefined : (JSON.parse(config) as { vocab_size?: unknown })
  if (typeof vocab?.vocab_size === "number" && ids > vocab.vocab_size)
    throw new Error(
      `--tokenizer: its tokenizer.json has ${ids} ids, more than the model's vocab_size ${vocab.vocab_size}`,
    )
}

/** Writes the files into a staging folder beside `dir`, then moves it into place. */
const writeCheckpoint = (
  dir: string,
  bytes: Uint8Array,
  options: Pick<HfCheckpointOptions, "config" | "extraFiles">,
) =>
  Effect.tryPromise({
    try: async () => {
      checkTokenizerFits(bytes, options.extraFiles ?? [])
      const files = hfCheckpointFiles(bytes, options)
      const staging = join(dirname(dir), `.${process.pid}-${Date.now()}.partial`)
      await rm(staging, { recursive: true, force: true })
      try {
        for (const file of files) {
          const path = join(staging, file.name)
          await mkdir(dirname(path), { recursive: true })
          await writeFile(path, file.bytes)
        }
        // An empty folder is replaced; anything else was refused before the fetch.
        if (existsSync(dir)) await rm(dir, { recursive: true })
        await rename(staging, dir)
      } finally {
        await rm(staging, { recursive: true, force: true })
      }
      return files.map((f) => f.name)
    },
    catch: (e) =>
      new WeightsWriteFailed({ dir, reason: e instanceof Error ? e.message : String(e) }),
  })

export const weightsCommand = (
  args: ReadonlyArray<string>,
  output: Output = stdio,
): Effect.Effect<void, unknown> | string => {
  const usage = weightsUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  const [sub, ...rest] = positionals
  if (sub === undefined) throw new UsageError("t1 weights needs a subcommand: fetch", usage)
  if (sub !== "fetch")
    throw new UsageError(`unknown subcommand ${JSON.stringify(sub)} (only: fetch)`, usage)
  const jobId = jobIdArgument(rest, usage, "weights fetch")
  const raw = values.version
  if (raw !== undefined && !/^\d{1,19}$/.test(raw))
    throw new UsageError(`--version must be an integer >= 0, got ${JSON.stringify(raw)}`, usage)
  const version = raw === undefined ? undefined : BigInt(raw)
  if (values.out === undefined || values.out === "")
    throw new UsageError("--out DIR is required", usage)
  const out = resolve(values.out)
  if (existsSync(out) && readdirSync(out).length > 0)
    throw new UsageError(`--out ${out} is not empty; name a new or empty directory`, usage)
  const exportOptions = tokenizerOptions(values.tokenizer, usage)
  const target = gatewayTargetFrom(values, usage)
  return withGateway(target, (client) =>
    Effect.gen(function* () {
      const { head, bytes } = yield* client.effect.fetchJobWeights({
        jobId,
        ...(version === undefined ? {} : { policyVersion: version }),
      })
      const names = yield* writeCheckpoint(out, bytes, exportOptions)
      output.err(
        `job ${jobId}: version ${head.policyVersion} (step ${head.step}, ${bytes.length} bytes, sha256 ${head.sha256})`,
      )
      output.out(`${out} (${names.length} files: ${names.join(", ")})`)
    }),
  )
}
