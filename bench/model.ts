/**
 * TinyMoE end to end: training (forward + next-token loss + backward) tokens/s and sampling
 * (batched decode) tokens/s, with t1's kernels and with the plain reference kernels, and the same
 * architecture in PyTorch on CPU (bench/model_torch.py, 2 threads) as the baseline.
 *
 *   npm run bench:model -- [--json] [--reps N] [--warmup N] [--threads N] [--kernels K]
 *                          [--no-torch] [--no-reference] [--sample-tokens N] [--products]
 *
 * Shapes (the issue's): 4 layers, d_model 128, 4 heads, 8 experts top-2, expert hidden 256,
 * vocabulary 1024, sequences of 256 tokens, batches of 8. A training step is
 * `supervisedGradients` over the batch (every position trained), timed as the median of --reps
 * steps after --warmup untimed ones; tokens/s = batch × sequence / step time. Sampling: 8
 * sequences with a 32-token prompt (prefilled, untimed) decode --sample-tokens tokens each at
 * temperature 1 through the continuous batcher; tokens/s = generated tokens / decode time.
 * The reference column runs the same model code and threads on the plain TypeScript kernels.
 * PyTorch runs the same architecture (bench/model_torch.py) with 2 threads, the baseline the
 * ratio is taken against, and with 1 thread (on a busy 2-core machine OpenMP's 2 threads can be
 * far slower than 1; the best of the two is reported as well). Reports; never asserts. PyTorch is
 * looked up as $T1_PYTHON, python3, /usr/bin/python3 (Debian's python3-torch); where none imports
 * torch, its columns read "skipped" and the reason is printed.
 */
import { spawnSync } from "node:child_process"
import { availableParallelism, loadavg } from "node:os"
import { dirname, join } from "node:path"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import type { Kernels } from "../model/kernels/kernels.ts"
import { referenceKernels } from "../model/kernels/reference.ts"
import { type KernelChoice, selectKernels } from "../model/kernels/select.ts"
import { makeSimdKernels } from "../model/kernels/simd.ts"
import type { TinyMoeConfig } from "../model/moe/config.ts"
import { generateBatch } from "../model/moe/generate.ts"
import { TinyMoe } from "../model/moe/model.ts"
import { closeGradientWorkers, resolveThreads, type Threads } from "../model/moe/parallel.ts"
import { Sequence } from "../model/moe/sequence.ts"
import { type SupervisedSequence, supervisedGradients } from "../model/moe/train.ts"
import { Rng } from "../model/rng.ts"
import { median } from "./stats.ts"

const USAGE = `usage: npm run bench:model -- [--json] [--reps N] [--warmup N] [--threads N]
                              [--kernels auto|simd|reference|webasm|cpu] [--no-torch]
                              [--no-reference] [--sample-tokens N] [--products]

  --json             also print one JSON object as the last line of stdout
  --reps N           timed training steps per variant (median reported; default 5)
  --warmup N         untimed training steps before them (default 1; with 0 the first timed
                     step includes starting the worker threads)
  --threads N        threads for the training step, this one included (default: auto,
                     i.e. $T1_MODEL_THREADS, else every core up to 4 for a batch this size)
  --kernels K        t1's kernels (default auto)
  --sample-tokens N  tokens decoded per sequence in the sampling measure (default 64; 0 skips)
  --no-torch         skip the PyTorch baseline
  --no-reference     skip the reference-kernel baseline
  --products         also time the matrix products alone (simd against the reference) on the
                     training step's shapes
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
  readonly products: boolean
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
  products: { type: "boolean" },
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
  if (!["auto", "simd", "reference", "webasm", "cpu"].includes(kernels))
    throw new UsageError(`--kernels must be auto, simd, reference, webasm or cpu, got '${kernels}'`)
  return {
    json: v.json === true,
    reps: intFlag("reps", v.reps, 5, 1),
    warmup: intFlag("warmup", v.warmup, 1, 0),
    threads: v.threads === undefined ? undefined : intFlag("threads", v.threads, 1, 1),
    kernels: kernels as KernelChoice,
    sampleTokens: intFlag("sample-tokens", v["sample-tokens"], 64, 0),
    torch: v["no-torch"] !== true,
    reference: v["no-reference"] !== true,
    products: v.products === true,
  }
}

const log = (line: string) => process.stderr.write(`${line}\n`)

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
  readonly threads: number
}

const benchTrain = (
  kernels: Kernels,
  threads: Threads | undefined,
  opts: Options,
  label: string,
): TrainResult => {
  const model = TinyMoe.create({ config: CONFIG, seed: 0, kernels })
  const batch = makeBatch()
  const options = threads === undefined ? {} : { threads }
  const step = () => {
    const started = performance.now()
    const result = supervisedGradients(model, batch, 0, options)
    return { ms: performance.now() - started, loss: result.loss }
  }
  for (let i = 0; i < opts.warmup; i++) {
    const { ms } = step()
    log(`  ${label}: warm-up step ${i + 1}: ${ms.toFixed(0)} ms`)
  }
  const times: number[] = []
  let loss = Number.NaN
  for (let i = 0; i < opts.reps; i++) {
    const r = step()
    times.push(r.ms)
    loss = r.loss
    log(`  ${label}: step ${i + 1}: ${r.ms.toFixed(0)} ms (loss ${r.loss.toFixed(4)})`)
  }
  const stepMs = median(times)
  return {
    tokS: (BATCH * SEQ) / (stepMs / 1000),
    stepMs,
    loss,
    threads: resolveThreads(model, batch, threads),
  }
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

/** The training step's products, alone: G multiply-adds per second for simd and the reference. */
const benchProducts = (): string[] => {
  const simd = makeSimdKernels()
  const rng = new Rng(3)
  const random = (n: number) => Float32Array.from({ length: n }, () => rng.next() * 2 - 1)
  const cases: Array<[string, "matmul" | "matmulTransB" | "matmulTransA", number, number, number]> =
    [
      ["q/k/v/o projection", "matmul", SEQ, 128, 128],
      ["expert up (64 rows)", "matmul", 64, 128, 256],
      ["expert down (64 rows)", "matmul", 64, 256, 128],
      ["LM head", "matmul", SEQ, 128, 1024],
      ["attention scores (tile)", "matmulTransB", 64, 32, SEQ],
      ["LM head backward (dx)", "matmulTransB", SEQ, 1024, 128],
      ["expert weight gradient", "matmulTransA", 128, 64, 256],
      ["decode expert (2 rows)", "matmul", 2, 128, 256],
    ]
  const lines = [
    "| product | m×k·k×n | reference G MAC/s | simd G MAC/s | × |",
    "|---|---|--:|--:|--:|",
  ]
  for (const [label, kernel, m, k, n] of cases) {
    const a = random(m * k)
    const b = random(k * n)
    const out = new Float32Array(m * n)
    const rate = (kern: Kernels) => {
      const call = () => kern[kernel](a, b, m, k, n, out)
      for (let i = 0; i < 3; i++) call()
      let calls = 0
      const started = performance.now()
      while (performance.now() - started < 300) {
        call()
        calls++
      }
      return (m * k * n * calls) / ((performance.now() - started) / 1000) / 1e9
    }
    const r = rate(referenceKernels)
    const w = rate(simd)
    lines.push(
      `| ${label} | ${m}×${k}·${k}×${n} | ${r.toFixed(2)} | ${w.toFixed(2)} | ${(w / r).toFixed(1)} |`,
    )
  }
  return lines
}

interface TorchResult {
  readonly trainTokS?: number
  readonly stepMs?: number
  readonly sampleTokS?: number
  readonly version?: string
  readonly skipped?: string
}

let torchPython: string | undefined
let torchMissing: string | undefined

/** The first of $T1_PYTHON, python3, /usr/bin/python3 that imports torch (looked up once). */
const findTorchPython = (): string | undefined => {
  if (torchPython !== undefined || torchMissing !== undefined) return torchPython
  const reasons: string[] = []
  for (const python of [process.env.T1_PYTHON, "python3", "/usr/bin/python3"]) {
    if (python === undefined || python === "") continue
    const probe = spawnSync(python, ["-c", "import torch"], { encoding: "utf8" })
    if (!probe.error && probe.status === 0) {
      torchPython = python
      return python
    }
    reasons.push(
      `${python}: ${probe.error?.message ?? probe.stderr.trim().split("\n").at(-1) ?? "failed"}`,
    )
  }
  torchMissing = `PyTorch not found (install Debian's python3-torch, or set T1_PYTHON): ${reasons.join("; ")}`
  return undefined
}

const benchTorch = (opts: Options, threads: number, sampleTokens: number): TorchResult => {
  const python = findTorchPython()
  if (python === undefined) return { skipped: torchMissing ?? "PyTorch not found" }
  const script = join(dirname(fileURLToPath(import.meta.url)), "model_torch.py")
  const flags: Record<string, number> = {
    layers: CONFIG.nLayers as number,
    "d-model": CONFIG.dModel as number,
    heads: CONFIG.nHeads as number,
    experts: CONFIG.nExperts as number,
    "top-k": CONFIG.topK as number,
    "d-ff": CONFIG.dFf as number,
    vocab: CONFIG.vocabSize as number,
    seq: SEQ,
    batch: BATCH,
    threads,
    reps: opts.reps,
    warmup: Math.max(1, opts.warmup),
    prompt: PROMPT,
    "sample-tokens": sampleTokens,
  }
  const args = [script, ...Object.entries(flags).flatMap(([k, v]) => [`--${k}`, String(v)])]
  log(`torch (${threads} thread${threads === 1 ? "" : "s"}): ${python} ${args.join(" ")}`)
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
  log(`  ${parsed.step_ms.toFixed(0)} ms per step`)
  return {
    trainTokS: parsed.train_tok_s,
    stepMs: parsed.step_ms,
    ...(parsed.sample_tok_s !== undefined ? { sampleTokS: parsed.sample_tok_s } : {}),
    version: parsed.torch,
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
  const t1 = benchTrain(kernels, opts.threads, opts, "t1")
  log("reference kernels (same code, same threads):")
  const ref = opts.reference
    ? benchTrain(referenceKernels, opts.threads, opts, "reference")
    : undefined
  log("sampling:")
  const t1Sample = opts.sampleTokens > 0 ? benchSample(kernels, opts.sampleTokens) : Number.NaN
  const refSample =
    opts.reference && opts.sampleTokens > 0
      ? benchSample(referenceKernels, opts.sampleTokens)
      : Number.NaN
  const torch: TorchResult = opts.torch
    ? benchTorch(opts, 2, opts.sampleTokens)
    : { skipped: "--no-torch" }
  const torch1: TorchResult =
    opts.torch && !torch.skipped ? benchTorch(opts, 1, opts.sampleTokens) : torch
  if (torch.skipped) log(`torch: skipped: ${torch.skipped}`)
  await closeGradientWorkers()

  const ratio = torch.trainTokS ? t1.tokS / torch.trainTokS : Number.NaN
  const best = Math.max(torch.trainTokS ?? 0, torch1.trainTokS ?? 0)
  const ratioBest = best > 0 ? t1.tokS / best : Number.NaN
  const rows: string[][] = [
    [
      "",
      `t1 (${t1.threads} thread${t1.threads === 1 ? "" : "s"})`,
      "reference kernels",
      "PyTorch CPU, 2 threads",
      "PyTorch CPU, 1 thread",
      "t1 / PyTorch 2 threads",
    ],
    [
      "train tokens/s (fwd+bwd)",
      fmt(t1.tokS),
      fmt(ref?.tokS),
      fmt(torch.trainTokS),
      fmt(torch1.trainTokS),
      fmt(ratio, 2),
    ],
    ["train step ms", fmt(t1.stepMs), fmt(ref?.stepMs), fmt(torch.stepMs), fmt(torch1.stepMs), ""],
    [
      `sample tokens/s (decode, batch ${BATCH})`,
      fmt(t1Sample),
      fmt(refSample),
      fmt(torch.sampleTokS),
      fmt(torch1.sampleTokS),
      torch.sampleTokS ? fmt(t1Sample / torch.sampleTokS, 2) : "",
    ],
  ]
  const widths = (rows[0] as string[]).map((_, i) =>
    Math.max(...rows.map((r) => (r[i] as string).length)),
  )
  const lines = rows.map(
    (r) =>
      `| ${r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join(" | ")} |`,
  )
  lines.splice(
    1,
    0,
    `|${widths.map((w, i) => (i === 0 ? "-" : "").padEnd(w + 1, "-") + (i === 0 ? "-" : ":")).join("|")}|`,
  )
  const load = loadavg()
  lines.push(
    "",
    `t1 kernels: ${kernels.name}; torch: ${torch.version ?? torch.skipped}; ` +
      `t1 / best PyTorch: ${fmt(ratioBest, 2)}; load average at the end: ${load.map((x) => x.toFixed(1)).join(" ")} on ${availableParallelism()} cores`,
  )
  if (opts.products) lines.push("", ...benchProducts())
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
        torch_1t_train_tok_s: num(torch1.trainTokS),
        torch_1t_sample_tok_s: num(torch1.sampleTokS),
        ratio_vs_best_torch: num(ratioBest),
        t1_step_ms: num(t1.stepMs),
        t1_ref_step_ms: num(ref?.stepMs),
        torch_step_ms: num(torch.stepMs),
        t1_threads: t1.threads,
        t1_kernels: kernels.name,
        torch: torch.version ?? null,
        torch_skipped: torch.skipped ?? null,
        loadavg: load,
        cores: availableParallelism(),
        reps: opts.reps,
        warmup: opts.warmup,
        node: process.version,
      })}\n`,
    )
  }
  return 0
}

process.exitCode = await main()
