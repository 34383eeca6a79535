/**
 * TinyMoE end to end: training (forward + next-token loss + backward) tokens/s and sampling
 * (batched decode) tokens/s, with t1's kernels and with the plain reference kernels, and the same
 * architecture in PyTorch on CPU (bench/model_torch.py, 2 threads) as the baseline.
 *
 *   npm run bench:model -- [--json] [--reps N] [--warmup N] [--threads N] [--kernels K]
 *                          [--no-torch] [--no-reference] [--sample-tokens N]
 *
 * Shapes (the issue's): 4 layers, d_model 128, 4 heads, 8 experts top-2, expert hidden 256,
 * vocabulary 1024, sequences of 256 tokens, batches of 8. A training step is
 * `supervisedGradients` over the batch (every position trained), timed as the median of --reps
 * steps after --warmup untimed ones; tokens/s = batch × sequence / step time. Sampling: 8
 * sequences with a 32-token prompt (prefilled, untimed) decode --sample-tokens tokens each at
 * temperature 1 through the continuous batcher; tokens/s = generated tokens / decode time.
 * Reports; never asserts. PyTorch is looked up as $T1_PYTHON, python3, /usr/bin/python3 (Debian's
 * python3-torch); where none imports torch, its columns read "skipped" and the reason is printed.
 */
import { spawnSync } from "node:child_process"
import { dirname, join } from "node:path"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import type { Kernels } from "../model/kernels/kernels.ts"
import { referenceKernels } from "../model/kernels/reference.ts"
import { type KernelChoice, selectKernels } from "../model/kernels/select.ts"
import type { TinyMoeConfig } from "../model/moe/config.ts"
import { generateBatch } from "../model/moe/generate.ts"
import { TinyMoe } from "../model/moe/model.ts"
import { Sequence } from "../model/moe/sequence.ts"
import { type SupervisedSequence, supervisedGradients } from "../model/moe/train.ts"
import { Rng } from "../model/rng.ts"

const USAGE = `usage: npm run bench:model -- [--json] [--reps N] [--warmup N] [--threads N]
                              [--kernels auto|reference|webasm|cpu] [--no-torch]
                              [--no-reference] [--sample-tokens N]

  --json             also print one JSON object as the last line of stdout
  --reps N           timed training steps per variant (median reported; default 5)
  --warmup N         untimed training steps before them (default 1)
  --threads N        worker threads for t1's training step (default: the model default)
  --kernels K        t1's kernels (default auto)
  --sample-tokens N  tokens decoded per sequence in the sampling measure (default 64; 0 skips)
  --no-torch         skip the PyTorch baseline
  --no-reference     skip the reference-kernel baseline
  -h, --help         this text`

const CONFIG: Partial<TinyMoeConfig> = {
  vocabSize: 1024,
  dModel: 128,
  nLayers: 4,
  nHeads: 4,
  nExperts: 8,
  topK: 2,
  dFf: 256,
  maxSeqLen: 512,
}
const SEQ = 256
const BATCH = 8
const PROMPT = 32

class UsageError extends Error {}

interface Options {
  readonly json: boolean
  readonly reps: number
  readonly warmup: number
  readonly threads: number | undefined
  readonly kernels: KernelChoice
  readonly sampleTokens: number
  readonly torch: boolean
  readonly reference: boolean
}

const FLAGS = {
  json: { type: "boolean" },
  reps: { type: "string" },
  warmup: { type: "string" },
  threads: { type: "string" },
  kernels: { type: "string" },
  "sample-tokens": { type: "string" },
  "no-torch": { type: "boolean" },
  "no-reference": { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const

const intFlag = (name: string, value: string | undefined, fallback: number, min: number) => {
  if (value === undefined) return fallback
  const n = Number(value)
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min)
    throw new UsageError(`--${name} must be an integer ≥ ${min}, got '${value}'`)
  return n
}

const parseOptions = (argv: ReadonlyArray<string>): Options | "help" => {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof FLAGS }>>
  try {
    parsed = parseArgs({ args: [...argv], strict: true, allowPositionals: false, options: FLAGS })
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e))
  }
  const v = parsed.values
  if (v.help === true) return "help"
  const kernels = v.kernels ?? "auto"
  if (!["auto", "reference", "webasm", "cpu"].includes(kernels))
    throw new UsageError(`--kernels must be auto, reference, webasm or cpu, got '${kernels}'`)
  return {
    json: v.json === true,
    reps: intFlag("reps", v.reps, 5, 1),
    warmup: intFlag("warmup", v.warmup, 1, 0),
    threads: v.threads === undefined ? undefined : intFlag("threads", v.threads, 1, 1),
    kernels: kernels as KernelChoice,
    sampleTokens: intFlag("sample-tokens", v["sample-tokens"], 64, 0),
    torch: v["no-torch"] !== true,
    reference: v["no-reference"] !== true,
  }
}

const log = (line: string) => process.stderr.write(`${line}\n`)
const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}

const makeBatch = (): SupervisedSequence[] => {
  const rng = new Rng(1)
  const vocab = CONFIG.vocabSize as number
  const weight = 1 / (BATCH * (SEQ - 1))
  return Array.from({ length: BATCH }, () => ({
    ids: Int32Array.from({ length: SEQ }, () => Math.floor(rng.next() * vocab)),
    weights: new Float64Array(SEQ - 1).fill(weight),
  }))
}

interface TrainResult {
  readonly tokS: number
  readonly stepMs: number
  readonly loss: number
}

const benchTrain = async (
  kernels: Kernels,
  threads: number | undefined,
  opts: Options,
  label: string,
): Promise<TrainResult> => {
  const model = TinyMoe.create({ config: CONFIG, seed: 0, kernels })
  const batch = makeBatch()
  const step = async () => {
    const started = performance.now()
    const result = supervisedGradients(model, batch, 0, threads === undefined ? {} : { threads })
    return { ms: performance.now() - started, loss: result.loss }
  }
  for (let i = 0; i < opts.warmup; i++) {
    const { ms } = await step()
    log(`  ${label}: warm-up step ${i + 1}: ${ms.toFixed(0)} ms`)
  }
  const times: number[] = []
  let loss = Number.NaN
  for (let i = 0; i < opts.reps; i++) {
    const r = await step()
    times.push(r.ms)
    loss = r.loss
    log(`  ${label}: step ${i + 1}: ${r.ms.toFixed(0)} ms (loss ${r.loss.toFixed(4)})`)
  }
  const stepMs = median(times)
  return { tokS: (BATCH * SEQ) / (stepMs / 1000), stepMs, loss }
}

const benchSample = (kernels: Kernels, tokens: number): number => {
  const model = TinyMoe.create({ config: CONFIG, seed: 0, kernels })
  const run = () => {
    const rng = new Rng(2)
    const sequences = Array.from({ length: BATCH }, () => {
      const s = new Sequence(model, model.newCache(PROMPT + tokens + 1))
      s.append(
        Array.from({ length: PROMPT }, () => Math.floor(rng.next() * model.config.vocabSize)),
      )
      s.flush()
      return s
    })
    const started = performance.now()
    const generated = generateBatch(
      model,
      sequences.map((sequence, i) => ({
        sequence,
        params: { temperature: 1, topP: 1, maxTokens: tokens, stopTokenIds: new Set<number>() },
        rng: new Rng(10 + i),
      })),
    )
    const s = (performance.now() - started) / 1000
    return generated.reduce((n, g) => n + g.tokens.length, 0) / s
  }
  run()
  return Math.max(run(), run())
}

interface TorchResult {
  readonly trainTokS?: number
  readonly stepMs?: number
  readonly sampleTokS?: number
  readonly version?: string
  readonly skipped?: string
}

const torchPythons = (): string[] =>
  [process.env.T1_PYTHON, "python3", "/usr/bin/python3"].filter(
    (p): p is string => p !== undefined && p !== "",
  )

const benchTorch = (opts: Options): TorchResult => {
  const script = join(dirname(fileURLToPath(import.meta.url)), "model_torch.py")
  const reasons: string[] = []
  for (const python of torchPythons()) {
    const probe = spawnSync(python, ["-c", "import torch"], { encoding: "utf8" })
    if (probe.error || probe.status !== 0) {
      reasons.push(
        `${python}: ${probe.error?.message ?? probe.stderr.trim().split("\n").at(-1) ?? "failed"}`,
      )
      continue
    }
    const args = [
      script,
      "--layers",
      String(CONFIG.nLayers),
      "--d-model",
      String(CONFIG.dModel),
      "--heads",
      String(CONFIG.nHeads),
      "--experts",
      String(CONFIG.nExperts),
      "--top-k",
      String(CONFIG.topK),
      "--d-ff",
      String(CONFIG.dFf),
      "--vocab",
      String(CONFIG.vocabSize),
      "--seq",
      String(SEQ),
      "--batch",
      String(BATCH),
      "--threads",
      "2",
      "--reps",
      String(opts.reps),
      "--warmup",
      String(Math.max(1, opts.warmup)),
      "--prompt",
      String(PROMPT),
      "--sample-tokens",
      String(opts.sampleTokens),
    ]
    log(`  torch: ${python} ${args.join(" ")}`)
    const run = spawnSync(python, args, { encoding: "utf8", maxBuffer: 16 << 20 })
    const last = run.stdout.trim().split("\n").at(-1) ?? ""
    if (run.status !== 0) {
      return { skipped: `${python} bench/model_torch.py failed: ${run.stderr.trim() || last}` }
    }
    const parsed = JSON.parse(last) as {
      train_tok_s: number
      step_ms: number
      sample_tok_s?: number
      torch: string
    }
    return {
      trainTokS: parsed.train_tok_s,
      stepMs: parsed.step_ms,
      ...(parsed.sample_tok_s !== undefined ? { sampleTokS: parsed.sample_tok_s } : {}),
      version: parsed.torch,
    }
  }
  return {
    skipped: `PyTorch not found (install Debian's python3-torch, or set T1_PYTHON): ${reasons.join("; ")}`,
  }
}

const fmt = (x: number | undefined, digits = 0): string =>
  x === undefined || !Number.isFinite(x) ? "skipped" : x.toFixed(digits)

const main = async (): Promise<number> => {
  let opts: Options
  try {
    const parsed = parseOptions(process.argv.slice(2))
    if (parsed === "help") {
      process.stdout.write(`${USAGE}\n`)
      return 0
    }
    opts = parsed
  } catch (e) {
    if (!(e instanceof UsageError)) throw e
    process.stderr.write(`bench:model: ${e.message}\n${USAGE}\n`)
    return 2
  }
  const kernels = selectKernels(opts.kernels)
  log(
    `model bench: ${CONFIG.nLayers} layers, d_model ${CONFIG.dModel}, ${CONFIG.nExperts} experts top-${CONFIG.topK}, d_ff ${CONFIG.dFf}, vocab ${CONFIG.vocabSize}, ${BATCH} × ${SEQ} tokens; ${opts.reps} steps after ${opts.warmup} warm-up`,
  )
  log(`t1 (${kernels.name}):`)
  const t1 = await benchTrain(kernels, opts.threads, opts, "t1")
  const ref = opts.reference ? await benchTrain(referenceKernels, 1, opts, "reference") : undefined
  const t1Sample = opts.sampleTokens > 0 ? benchSample(kernels, opts.sampleTokens) : Number.NaN
  const refSample =
    opts.reference && opts.sampleTokens > 0
      ? benchSample(referenceKernels, opts.sampleTokens)
      : Number.NaN
  const torch = opts.torch ? benchTorch(opts) : { skipped: "--no-torch" }
  if (torch.skipped) log(`torch: skipped: ${torch.skipped}`)

  const ratio = torch.trainTokS ? t1.tokS / torch.trainTokS : Number.NaN
  const rows: Array<[string, string, string, string, string]> = [
    ["", "t1", "reference kernels", "PyTorch CPU (2 threads)", "t1 / PyTorch"],
    ["train tokens/s (fwd+bwd)", fmt(t1.tokS), fmt(ref?.tokS), fmt(torch.trainTokS), fmt(ratio, 2)],
    ["train step ms", fmt(t1.stepMs), fmt(ref?.stepMs), fmt(torch.stepMs), ""],
    [
      `sample tokens/s (decode, batch ${BATCH})`,
      fmt(t1Sample),
      fmt(refSample),
      fmt(torch.sampleTokS),
      torch.sampleTokS ? fmt(t1Sample / torch.sampleTokS, 2) : "",
    ],
  ]
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] as string).length)))
  const lines = rows.map(
    (r) =>
      `| ${r.map((cell, i) => (i === 0 ? cell.padEnd(widths?.[i] ?? 0) : cell.padStart(widths?.[i] ?? 0))).join(" | ")} |`,
  )
  lines.splice(1, 0, `|${widths?.map((w) => "-".repeat(w + 2)).join("|")}|`)
  lines.push(
    "",
    `t1 kernels: ${kernels.name}; threads: ${opts.threads ?? "default"}; torch: ${torch.version ?? torch.skipped}`,
  )
  process.stdout.write(`${lines.join("\n")}\n`)
  if (opts.json) {
    const num = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? null : x)
    process.stdout.write(
      `${JSON.stringify({
        t1_train_tok_s: num(t1.tokS),
        t1_ref_train_tok_s: num(ref?.tokS),
        torch_train_tok_s: num(torch.trainTokS),
        ratio_vs_torch: num(ratio),
        t1_sample_tok_s: num(t1Sample),
        t1_ref_sample_tok_s: num(refSample),
        torch_sample_tok_s: num(torch.sampleTokS),
        t1_step_ms: num(t1.stepMs),
        t1_ref_step_ms: num(ref?.stepMs),
        torch_step_ms: num(torch.stepMs),
        t1_kernels: kernels.name,
        threads: opts.threads ?? null,
        torch: torch.version ?? null,
        torch_skipped: torch.skipped ?? null,
        reps: opts.reps,
        warmup: opts.warmup,
        node: process.version,
      })}\n`,
    )
  }
  return 0
}

process.exitCode = await main()
