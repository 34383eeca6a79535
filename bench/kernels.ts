/**
 * Policy-model kernels: the TypeScript reference versus gpu.js in `webasm` mode (WebAssembly,
 * f32x4 SIMD, synchronous so single-threaded) and `cpu` mode (transpiled JavaScript), on shapes
 * of the default model (d_model 64, d_ff 128, vocab 1024; 256-row prefill, 1-row decode), all in
 * one run with interleaved repetitions so machine noise hits every backend alike.
 *
 *   npx tsx bench/kernels.ts [--json] [--reps N] [--warmup N] [--precision f32|f64] [--kernel K]
 *
 * Per case and backend: one timed first call (for gpu.js the build of that shape, after priming
 * calls per kernel so the parser itself is warm), untimed warm-up (--warmup calls and at least
 * 40 ms, so that the JIT has tiered up even µs-scale calls), then --reps rounds that each time
 * every backend once, in rotating order; a round times a batch of calls sized to last about a
 * millisecond, so µs-scale decode calls are resolved. Reported: the median ms per call, the
 * speedup over the reference, the winner, and the largest error against the reference
 * (|got − ref| / (1 + |ref|)). A second table compares gpu.js's two ways of handling shapes that
 * change between calls (a compiled kernel per shape, or one resizable kernel). The machine's
 * other load shows up as run-to-run spread (±20% on this repo's 2-core box), so compare several
 * runs before changing the routing table in model/kernels/select.ts. Reports; never asserts.
 */
import { performance } from "node:perf_hooks"
import { parseArgs } from "node:util"
import { type GpuJsMode, type GpuJsStrategy, makeGpuJsKernels } from "../model/kernels/gpujs.ts"
import type { Floats, Kernels } from "../model/kernels/kernels.ts"
import { referenceKernels } from "../model/kernels/reference.ts"
import { KERNEL_NAMES, type KernelName } from "../model/kernels/select.ts"

const USAGE = `usage: npx tsx bench/kernels.ts [--json] [--reps N] [--warmup N] [--precision f32|f64]
                                    [--kernel NAME]

  --json             also print one JSON object as the last line of output
  --reps N           timed rounds per case, every backend once per round (default 25)
  --warmup N         untimed calls per backend and case after the first call, and at
                     least 40 ms of them (default 3)
  --precision P      f32 (the model's default) or f64 inputs and outputs (default f32)
  --kernel NAME      only this kernel's cases (matmul, matmulTransB, matmulTransA, rmsNorm,
                     logSoftmaxRows), and no shape-handling table
  -h, --help         this text`

type Precision = "f32" | "f64"

interface Options {
  readonly json: boolean
  readonly reps: number
  readonly warmup: number
  readonly precision: Precision
  readonly kernel: KernelName | undefined
}

class UsageError extends Error {}

const positiveInt = (name: string, value: string | undefined, fallback: number): number => {
  if (value === undefined) return fallback
  const n = Number(value)
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(`--${name} must be a positive integer, got '${value}'`)
  }
  return n
}

const FLAGS = {
  json: { type: "boolean" },
  reps: { type: "string" },
  warmup: { type: "string" },
  precision: { type: "string" },
  kernel: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const

/** Parsed options or "help"; throws UsageError. */
const parseOptions = (argv: ReadonlyArray<string>): Options | "help" => {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof FLAGS }>>
  try {
    parsed = parseArgs({ args: [...argv], strict: true, allowPositionals: false, options: FLAGS })
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e))
  }
  const { values } = parsed
  if (values.help === true) return "help"
  const precision = values.precision ?? "f32"
  if (precision !== "f32" && precision !== "f64") {
    throw new UsageError(`--precision must be f32 or f64, got '${precision}'`)
  }
  const kernel = KERNEL_NAMES.find((k) => k === values.kernel)
  if (values.kernel !== undefined && kernel === undefined) {
    throw new UsageError(
      `--kernel must be one of ${KERNEL_NAMES.join(", ")}, got '${values.kernel}'`,
    )
  }
  return {
    json: values.json === true,
    reps: positiveInt("reps", values.reps, 25),
    warmup: positiveInt("warmup", values.warmup, 3),
    precision,
    kernel,
  }
}

// ---- inputs

/** Mulberry32, so every run times the same numbers. */
const generator = (seed: number) => {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const next = generator(0x5eed)
const alloc = (p: Precision, n: number): Floats =>
  p === "f32" ? new Float32Array(n) : new Float64Array(n)
const random = (p: Precision, n: number, scale = 1): Floats => {
  const a = alloc(p, n)
  for (let i = 0; i < n; i++) a[i] = (next() * 2 - 1) * scale
  return a
}

interface Case {
  readonly kernel: KernelName
  /** m×k·k×n (the logical product, whatever the transposes) or rows×width. */
  readonly shape: string
  readonly note: string
  /** A call of this case on `kernels`, writing into an output of its own. */
  readonly call: (kernels: Kernels) => { run: () => void; out: Floats }
}

const matmulCase = (
  p: Precision,
  kernel: "matmul" | "matmulTransB" | "matmulTransA",
  m: number,
  k: number,
  n: number,
  note: string,
): Case => {
  const a = random(p, m * k)
  const b = random(p, k * n)
  return {
    kernel,
    shape: `${m}×${k}·${k}×${n}`,
    note,
    call: (kernels) => {
      const out = alloc(p, m * n)
      return { run: () => kernels[kernel](a, b, m, k, n, out), out }
    },
  }
}

const cases = (p: Precision): Case[] => {
  const rms = (rows: number, d: number, note: string): Case => {
    const x = random(p, rows * d, 4)
    const gain = random(p, d)
    return {
      kernel: "rmsNorm",
      shape: `${rows}×${d}`,
      note,
      call: (kernels) => {
        const out = alloc(p, rows * d)
        const inv = alloc(p, rows)
        return { run: () => kernels.rmsNorm(x, gain, rows, d, 1e-5, out, inv), out }
      },
    }
  }
  const lsm = (rows: number, n: number, note: string): Case => {
    const x = random(p, rows * n, 4)
    return {
      kernel: "logSoftmaxRows",
      shape: `${rows}×${n}`,
      note,
      call: (kernels) => {
        const out = alloc(p, rows * n)
        return { run: () => kernels.logSoftmaxRows(x, rows, n, out), out }
      },
    }
  }
  return [
    matmulCase(p, "matmul", 1, 64, 64, "decode projection"),
    matmulCase(p, "matmul", 1, 64, 1024, "decode LM head"),
    matmulCase(p, "matmul", 4, 64, 64, "4 rows"),
    matmulCase(p, "matmul", 8, 64, 64, "8 rows"),
    matmulCase(p, "matmul", 16, 64, 64, "16 rows (an expert's batch)"),
    matmulCase(p, "matmul", 256, 64, 192, "prefill QKV"),
    matmulCase(p, "matmul", 256, 64, 1024, "prefill LM head"),
    matmulCase(p, "matmul", 256, 128, 64, "prefill FFN down"),
    matmulCase(p, "matmulTransA", 64, 256, 64, "weight gradient"),
    matmulCase(p, "matmulTransA", 64, 64, 64, "weight gradient, 64 rows"),
    matmulCase(p, "matmulTransA", 64, 32, 64, "weight gradient, 32 rows"),
    matmulCase(p, "matmulTransA", 64, 16, 64, "weight gradient, 16 rows"),
    matmulCase(p, "matmulTransB", 256, 64, 256, "attention-like"),
    matmulCase(p, "matmulTransB", 1, 64, 256, "decode attention-like"),
    rms(256, 64, "prefill"),
    rms(1, 64, "decode"),
    lsm(256, 1024, "prefill logits"),
    lsm(1, 1024, "decode logits"),
  ]
}

// ---- timing

const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2
}

/** Calls per timed batch so that a batch lasts about this long. */
const BATCH_MS = 1
/** Warm-up lasts at least --warmup calls and at least this long (JIT tiers up µs-scale calls). */
const WARMUP_MS = 40

const timeOnce = (run: () => void): number => {
  const t = performance.now()
  run()
  return performance.now() - t
}

interface Timing {
  /** Median ms per call. */
  readonly ms: number
  /** The first call, compile included. */
  readonly firstMs: number
}

/**
 * First call, warm-up, then `reps` rounds over all runs in rotating order. A round times a batch
 * per run, sized from the warm-up.
 */
const timeInterleaved = (
  runs: ReadonlyArray<() => void>,
  opts: Pick<Options, "reps" | "warmup">,
): Timing[] => {
  const firstMs = runs.map(timeOnce)
  const batch = runs.map((run) => {
    const until = performance.now() + WARMUP_MS
    let last = 0
    for (let i = 0; i < opts.warmup || performance.now() < until; i++) last = timeOnce(run)
    return Math.max(1, Math.min(1000, Math.ceil(BATCH_MS / Math.max(last, 1e-4))))
  })
  const samples: number[][] = runs.map(() => [])
  for (let r = 0; r < opts.reps; r++) {
    for (let q = 0; q < runs.length; q++) {
      const i = (q + r) % runs.length
      const run = runs[i] as () => void
      const n = batch[i] as number
      const t = performance.now()
      for (let c = 0; c < n; c++) run()
      samples[i]?.push((performance.now() - t) / n)
    }
  }
  return samples.map((s, i) => ({ ms: median(s), firstMs: firstMs[i] ?? 0 }))
}

const maxError = (got: Floats, want: Floats): number => {
  let e = 0
  for (let i = 0; i < want.length; i++) {
    const w = want[i] as number
    const d = Math.abs((got[i] as number) - w) / (1 + Math.abs(w))
    e = Number.isNaN(d) ? Number.POSITIVE_INFINITY : Math.max(e, d)
  }
  return e
}

// ---- bench

const BACKENDS = ["reference", "webasm", "cpu"] as const
type BackendName = (typeof BACKENDS)[number]

interface KernelRow {
  readonly kernel: KernelName
  readonly shape: string
  readonly note: string
  readonly ms: Record<BackendName, number>
  readonly firstMs: Record<BackendName, number>
  readonly maxErr: Record<BackendName, number>
  readonly winner: BackendName
}

interface StrategyRow {
  readonly mode: GpuJsMode
  readonly strategy: GpuJsStrategy
  readonly layout: string
  readonly prefillMs: number
  readonly decodeMs: number
  readonly logitsMs: number
  /** Mean first call of a matmul shape this instance has not seen. */
  readonly newShapeMs: number
}

const log = (line: string) => process.stderr.write(`${line}\n`)

/** Calls of every kernel on a tiny shape, so gpu.js's parser and call path are JIT-warm. */
const prime = (kernels: Kernels) => {
  const one = Float32Array.of(0.5)
  const out = new Float32Array(1)
  const inv = new Float32Array(1)
  for (let i = 0; i < 200; i++) {
    kernels.matmul(one, one, 1, 1, 1, out)
    kernels.matmulTransB(one, one, 1, 1, 1, out)
    kernels.matmulTransA(one, one, 1, 1, 1, out)
    kernels.rmsNorm(one, one, 1, 1, 1e-5, out, inv)
    kernels.logSoftmaxRows(one, 1, 1, out)
  }
}

const benchKernels = (opts: Options): KernelRow[] => {
  const webasm = makeGpuJsKernels("webasm")
  const cpu = makeGpuJsKernels("cpu")
  const backends: Record<BackendName, Kernels> = { reference: referenceKernels, webasm, cpu }
  for (const b of BACKENDS) prime(backends[b])
  const rows: KernelRow[] = []
  for (const c of cases(opts.precision)) {
    if (opts.kernel !== undefined && c.kernel !== opts.kernel) continue
    const calls = BACKENDS.map((b) => c.call(backends[b]))
    const timings = timeInterleaved(
      calls.map((x) => x.run),
      opts,
    )
    const refOut = calls[0]?.out ?? alloc(opts.precision, 0)
    const record = <T>(f: (i: number) => T): Record<BackendName, T> => ({
      reference: f(0),
      webasm: f(1),
      cpu: f(2),
    })
    const ms = record((i) => timings[i]?.ms ?? Number.NaN)
    const winner = BACKENDS.reduce((best, b) => (ms[b] < ms[best] ? b : best), "reference")
    const row: KernelRow = {
      kernel: c.kernel,
      shape: c.shape,
      note: c.note,
      ms,
      firstMs: record((i) => timings[i]?.firstMs ?? Number.NaN),
      maxErr: record((i) => maxError(calls[i]?.out ?? refOut, refOut)),
      winner,
    }
    log(
      `${c.kernel} ${c.shape}: reference ${fmtMs(ms.reference)}, webasm ${fmtMs(ms.webasm)}, ` +
        `cpu ${fmtMs(ms.cpu)} ms → ${winner}`,
    )
    rows.push(row)
  }
  webasm.destroy()
  cpu.destroy()
  return rows
}

const benchStrategies = (opts: Options): StrategyRow[] => {
  log("gpu.js shape handling")
  const p = opts.precision
  const prefill = matmulCase(p, "matmul", 256, 64, 192, "")
  const decode = matmulCase(p, "matmul", 1, 64, 64, "")
  const x = random(p, 256 * 1024, 4)
  const logits = alloc(p, 256 * 1024)
  const configs: { mode: GpuJsMode; strategy: GpuJsStrategy }[] = [
    { mode: "webasm", strategy: "cache" },
    { mode: "webasm", strategy: "dynamic" },
    { mode: "cpu", strategy: "cache" },
    { mode: "cpu", strategy: "dynamic" },
  ]
  const instances = configs.map((c) => makeGpuJsKernels(c.mode, { strategy: c.strategy }))
  for (const k of instances) prime(k)
  const timeAll = (make: (k: Kernels) => () => void) =>
    timeInterleaved(instances.map(make), opts).map((t) => t.ms)
  const prefillMs = timeAll((k) => prefill.call(k).run)
  const decodeMs = timeAll((k) => decode.call(k).run)
  const logitsMs = timeAll((k) => () => k.logSoftmaxRows(x, 256, 1024, logits))
  // First calls of shapes each instance has not seen: 64×64 weights, m = 100..105 rows.
  const a = random(p, 105 * 64)
  const w = random(p, 64 * 64)
  const out = alloc(p, 105 * 64)
  const newShapeMs = instances.map((k) => {
    let total = 0
    for (let m = 100; m < 106; m++) total += timeOnce(() => k.matmul(a, w, m, 64, 64, out))
    return total / 6
  })
  const rows = configs.map((c, i) => ({
    ...c,
    layout: instances[i]?.layout ?? "",
    prefillMs: prefillMs[i] ?? Number.NaN,
    decodeMs: decodeMs[i] ?? Number.NaN,
    logitsMs: logitsMs[i] ?? Number.NaN,
    newShapeMs: newShapeMs[i] ?? Number.NaN,
  }))
  for (const k of instances) k.destroy()
  return rows
}

// ---- report

const fmtMs = (ms: number): string =>
  ms >= 100 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(2) : ms >= 0.01 ? ms.toFixed(3) : ms.toFixed(4)
const round = (ms: number): number => Number(ms.toPrecision(4))

const report = (
  opts: Options,
  kernels: ReadonlyArray<KernelRow>,
  strategies: ReadonlyArray<StrategyRow>,
  seconds: number,
): { lines: string[]; json: Record<string, unknown> } => {
  const speedup = (r: KernelRow, b: BackendName) => `${(r.ms.reference / r.ms[b]).toFixed(2)}×`
  const head =
    "  kernel          shape              reference ms   webasm ms (vs ref)     cpu ms (vs ref)" +
    "    winner     first call webasm / cpu ms   max err webasm / cpu"
  const lines = [
    "",
    `policy-model kernels, ${opts.precision} inputs: median ms per call of ${opts.reps} ` +
      `interleaved rounds after ${opts.warmup} warm-up calls (node ${process.version})`,
    "",
    head,
    ...kernels.map(
      (r) =>
        `  ${r.kernel.padEnd(14)}  ${r.shape.padEnd(16)}  ${fmtMs(r.ms.reference).padStart(12)}` +
        `  ${fmtMs(r.ms.webasm).padStart(9)} (${speedup(r, "webasm").padStart(6)})` +
        `  ${fmtMs(r.ms.cpu).padStart(9)} (${speedup(r, "cpu").padStart(6)})` +
        `    ${r.winner.padEnd(9)}  ${fmtMs(r.firstMs.webasm).padStart(10)} / ${fmtMs(r.firstMs.cpu).padEnd(12)}` +
        `     ${r.maxErr.webasm.toExponential(1)} / ${r.maxErr.cpu.toExponential(1)}`,
    ),
    "",
    "  winner per kernel (all shapes):",
    ...[...new Set(kernels.map((r) => r.kernel))].map((k) => {
      const rows = kernels.filter((r) => r.kernel === k)
      return `    ${k.padEnd(14)}  ${rows.map((r) => `${r.shape} ${r.winner}`).join(", ")}`
    }),
    "",
    "gpu.js shape handling: cache = a compiled kernel per shape (LRU), dynamic = one resizable",
    "kernel; median ms per call, and the mean first call of a shape not seen before",
    "",
    "  mode    strategy  layout   matmul 256×64·64×192   matmul 1×64·64×64   logSoftmax 256×1024   new shape",
    ...strategies.map(
      (s) =>
        `  ${s.mode.padEnd(6)}  ${s.strategy.padEnd(8)}  ${s.layout.padEnd(6)}` +
        `  ${fmtMs(s.prefillMs).padStart(20)}  ${fmtMs(s.decodeMs).padStart(18)}` +
        `  ${fmtMs(s.logitsMs).padStart(20)}  ${fmtMs(s.newShapeMs).padStart(10)}`,
    ),
    "",
    `  total ${seconds.toFixed(1)} s`,
    "",
  ]
  const json = {
    kernels: kernels.map((r) => ({
      kernel: r.kernel,
      shape: r.shape,
      note: r.note,
      reference_ms: round(r.ms.reference),
      webasm_ms: round(r.ms.webasm),
      cpu_ms: round(r.ms.cpu),
      winner: r.winner,
      webasm_first_ms: round(r.firstMs.webasm),
      cpu_first_ms: round(r.firstMs.cpu),
      webasm_max_err: Number(r.maxErr.webasm.toPrecision(2)),
      cpu_max_err: Number(r.maxErr.cpu.toPrecision(2)),
    })),
    strategies: strategies.map((s) => ({
      mode: s.mode,
      strategy: s.strategy,
      layout: s.layout,
      matmul_256x64x192_ms: round(s.prefillMs),
      matmul_1x64x64_ms: round(s.decodeMs),
      log_softmax_256x1024_ms: round(s.logitsMs),
      new_shape_ms: round(s.newShapeMs),
    })),
    precision: opts.precision,
    reps: opts.reps,
    warmup: opts.warmup,
    node: process.version,
  }
  return { lines, json }
}

const main = (): number => {
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
    process.stderr.write(`bench:kernels: ${e.message}\n${USAGE}\n`)
    return 2
  }
  const started = performance.now()
  log(`kernels bench: ${opts.precision}, ${opts.reps} rounds after ${opts.warmup} warm-up calls`)
  const kernels = benchKernels(opts)
  const strategies = opts.kernel === undefined ? benchStrategies(opts) : []
  const { lines, json } = report(opts, kernels, strategies, (performance.now() - started) / 1000)
  process.stdout.write(`${lines.join("\n")}\n`)
  if (opts.json) process.stdout.write(`${JSON.stringify(json)}\n`)
  return 0
}

process.exitCode = main()
