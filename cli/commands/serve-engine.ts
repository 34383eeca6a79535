/**
 * `t1 serve --policy sglang|vllm`: the system against inference engines a user launched on a
 * Hugging Face model directory. The in-process sampler sends turns to the replicas and its engine
 * bridge loads each published version of the train job it follows (one at a time) into them;
 * the learner starts every job without policy_ref from the same model directory's weights, so
 * version 0 is what the engines were launched on.
 */
import { existsSync, statSync } from "node:fs"
import { join, resolve } from "node:path"
import { Effect } from "effect"
import type { FlagValues } from "../../actors/index.ts"
import { encodeWeights, readHfCheckpoint } from "../../model/index.ts"
import type { BusShape, Subjects } from "../../services/bus/index.ts"
import { UsageError } from "../flags.ts"

export const serveEngineFlagSpec = {
  policy: { type: "string" },
  "engine-url": { type: "string" },
  "engine-model": { type: "string" },
  "model-dir": { type: "string" },
  "checkpoint-dir": { type: "string" },
} as const

export const serveEngineFlagsHelp = `  --policy NAME             tinymoe (the embedded TinyMoE, default), sglang or vllm: episodes
                            sample on the engines at --engine-url
  --engine-url URL[,URL…]   the engine replicas' server roots (one model, launched on --model-dir)
  --engine-model NAME       with --policy vllm: the served model name
  --model-dir DIR           the Hugging Face model directory the engines were launched on
                            (config.json, safetensors, tokenizer.json, tokenizer_config.json with
                            the chat template): episodes are laid out by its template, and a train
                            job without policy_ref starts from its weights
  --checkpoint-dir DIR      where each published version is written as a checkpoint the engines
                            load (DIR/<job>/v<version>/, a path every replica reads); the replicas
                            follow one train job at a time: another train job submitted while one
                            runs fails with FAILED_PRECONDITION`

const ENGINES = ["sglang", "vllm"] as const
type Engine = (typeof ENGINES)[number]

/** Serve's engine settings, checked; undefined for the embedded TinyMoE. */
export interface ServeEngine {
  readonly policy: Engine
  readonly modelDir: string
  /** The sampler's flags (its own names, as `t1 actor sampler` takes them). */
  readonly sampler: FlagValues
}

type Values = { readonly [K in keyof typeof serveEngineFlagSpec]?: string | undefined }

const ENGINE_ONLY = ["engine-url", "engine-model", "model-dir", "checkpoint-dir"] as const

const directory = (flag: string, dir: string, usage: string): string => {
  if (!existsSync(dir) || !statSync(dir).isDirectory())
    throw new UsageError(`--${flag} ${dir}: not a directory`, usage)
  return resolve(dir)
}

export const serveEngineFrom = (values: Values, usage: string): ServeEngine | undefined => {
  const policy = values.policy ?? "tinymoe"
  if (policy === "tinymoe") {
    const stray = ENGINE_ONLY.find((f) => values[f] !== undefined)
    if (stray !== undefined)
      throw new UsageError(
        `--${stray} applies to inference engines: add --policy sglang or --policy vllm`,
        usage,
      )
    return undefined
  }
  if (!(ENGINES as ReadonlyArray<string>).includes(policy))
    throw new UsageError(
      `--policy must be tinymoe, sglang or vllm, got ${JSON.stringify(policy)}`,
      usage,
    )
  const missing = ["engine-url", "model-dir", "checkpoint-dir"].filter(
    (f) => (values[f as keyof Values] ?? "") === "",
  )
  if (missing.length > 0)
    throw new UsageError(
      `--policy ${policy} needs ${missing.map((f) => `--${f}`).join(", ")}: the engines' URLs, the model directory they were launched on, and where the checkpoints they load are written`,
      usage,
    )
  const urls = (values["engine-url"] ?? "").split(",").map((u) => u.trim())
  const bad = urls.find((u) => !/^https?:\/\/[^/\s]+/.test(u))
  if (bad !== undefined)
    throw new UsageError(
      `--engine-url must be http(s)://HOST:PORT[,…], got ${JSON.stringify(bad)}`,
      usage,
    )
  if (policy === "vllm" && (values["engine-model"] ?? "") === "")
    throw new UsageError("--policy vllm needs --engine-model: the model name vLLM serves", usage)
  if (policy === "sglang" && values["engine-model"] !== undefined)
    throw new UsageError(
      "--engine-model names vLLM's served model; SGLang serves the one it was launched on",
      usage,
    )
  const modelDir = directory("model-dir", values["model-dir"] ?? "", usage)
  if (!existsSync(join(modelDir, "config.json")))
    throw new UsageError(
      `--model-dir ${modelDir}: no config.json (a Hugging Face model directory)`,
      usage,
    )
  const checkpointDir = directory("checkpoint-dir", values["checkpoint-dir"] ?? "", usage)
  return {
    policy: policy as Engine,
    modelDir,
    sampler: {
      policy,
      "engine-url": urls.join(","),
      "model-dir": modelDir,
      "checkpoint-dir": checkpointDir,
      ...(values["engine-model"] === undefined ? {} : { "engine-model": values["engine-model"] }),
    },
  }
}

/** The weights object a job without policy_ref starts from under `t1 serve --model-dir`. */
export const MODEL_DIR_POLICY_REF = "serve-model-dir"

/**
 * Reads the model directory's weights (names, shapes, dtypes and finite values checked against
 * its config.json) and stores them, in t1's weights format, as the learner's default policy_ref.
 */
export const publishModelDir = (bus: BusShape, subjects: Subjects, dir: string) =>
  Effect.gen(function* () {
    const read = yield* Effect.try({
      try: () => readHfCheckpoint(dir),
      catch: (e) => new Error(`--model-dir ${dir}: ${e instanceof Error ? e.message : String(e)}`),
    })
    const store = yield* bus.objectStore(subjects.weightsBucket)
    yield* store.put(MODEL_DIR_POLICY_REF, encodeWeights(read.model, "F32", { version: 0n }))
    return read
  })
