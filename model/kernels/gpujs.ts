/**
 * gpu.js backends of the kernel interface: `webasm` (kernels compiled to WebAssembly with f32x4
 * SIMD, synchronous and single-threaded under this synchronous interface) and `cpu` (kernels
 * transpiled to plain JavaScript). Both compute in f32: Float64 inputs are rounded to Float32 once
 * per call, into scratch buffers this instance reuses.
 *
 * Kernel sources are strings, not functions: gpu.js parses a kernel's source text, and tsx/vite
 * rewrite TypeScript function bodies (esbuild's `__name` helpers, for one) in ways its parser
 * need not accept. Row reductions (rmsNorm's 1/rms, log-softmax's log-sum-exp) are a first kernel
 * with one cell per row; the elementwise part is a second kernel that reads those per-row values.
 *
 * Shapes change between calls (prefill versus decode), and gpu.js sizes are part of a compiled
 * kernel: webasm bakes every size into the wasm module, so any new shape costs a module build
 * (milliseconds) under either strategy below; cpu mode reads the output size at run time, so with
 * `dynamic` a new shape costs nothing. Strategies:
 * - `cache`: one kernel per (kernel, shape), fixed output, in an LRU map of `cacheSize` entries.
 * - `dynamic`: one kernel per kernel with `dynamicOutput`/`dynamicArguments`, resized per call
 *   (webasm then keeps its own per-size LRU of built modules, raised here to `cacheSize`).
 * Layouts: `2d` outputs [cols, rows] (webasm returns the rows as views of one buffer, and its SIMD
 * path needs thread.y uniform across a quad), `1d` one flat cell per output element (cpu mode
 * then returns one Float32Array instead of one freshly allocated array per row).
 */
import { GPU, type IKernelRunShortcut, type KernelOutput, type KernelVariable } from "gpu.js"
import type { Floats, Kernels } from "./kernels.ts"

export type GpuJsMode = "webasm" | "cpu"
export type GpuJsStrategy = "cache" | "dynamic"
export type GpuJsLayout = "1d" | "2d"

export interface GpuJsOptions {
  readonly strategy?: GpuJsStrategy
  readonly layout?: GpuJsLayout
  /** Compiled kernels kept per instance (cache), or built modules per kernel (dynamic webasm). */
  readonly cacheSize?: number
}

/** A gpu.js-backed Kernels; `destroy` releases every compiled kernel (and its wasm memory). */
export interface GpuJsKernels extends Kernels {
  readonly mode: GpuJsMode
  readonly strategy: GpuJsStrategy
  readonly layout: GpuJsLayout
  /** Compiled kernels currently held (for tests and benchmarks). */
  compiledCount(): number
  /**
   * Why gpu.js degraded any held kernel to its cpu backend (its `fallbackReason`); empty when
   * every kernel runs on `mode`.
   */
  fallbacks(): string[]
  destroy(): void
}

/**
 * Defaults per mode, from bench/kernels.ts on the 2-core dev machine (MEASUREMENTS.md): webasm
 * is faster with 2-D outputs (one row per SIMD quad, so reads of the row operand are one scalar
 * load), cpu mode with 1-D outputs. Once a shape is built both strategies run equally fast (within
 * noise), and `dynamic` takes a new shape in less time: webasm builds only a wasm module (1.5-3 ms
 * against 3.5-5 ms for a whole gpu.js kernel), cpu mode builds nothing (0.8 ms for the call itself
 * against 2-3.5 ms). Under `cache`, cpu mode reuses its result array between calls (gpu.js
 * `pipeline: true` with `immutable: false`, impossible with a resizable output): 4× faster on a
 * bare copy kernel of 256 Ki cells, where allocating the output dominates, but not measurable on
 * these kernels.
 */
const DEFAULTS: Record<GpuJsMode, { strategy: GpuJsStrategy; layout: GpuJsLayout }> = {
  webasm: { strategy: "dynamic", layout: "2d" },
  cpu: { strategy: "dynamic", layout: "1d" },
}

/** Large enough never to cap a loop: gpu.js caps loops whose bound is not a literal. */
const LOOP_MAX = 1 << 30

/**
 * The row/column of the cell a thread computes. `cols` is the name of the kernel argument that
 * holds the output width (only the 1-D layout needs it).
 */
const cellIndex = (layout: GpuJsLayout, cols: string): string =>
  layout === "2d"
    ? "const i = this.thread.y; const j = this.thread.x;"
    : `const i = Math.floor(this.thread.x / ${cols}); const j = this.thread.x - i * ${cols};`

type ArgType = "Array" | "Integer" | "Float"

interface KernelSpec {
  /** gpu.js kernel source: `function (<args>) { body }`. */
  readonly source: string
  /**
   * Declared argument types. Sizes are Integer so that index arithmetic is i32 in wasm (with
   * gpu.js's default Float it is f32, exact only below 2^24).
   */
  readonly types: Readonly<Record<string, ArgType>>
  /** Per-row kernels are 1-D whatever the layout. */
  readonly perRow: boolean
}

const A = "Array"
const I = "Integer"

const specs = (layout: GpuJsLayout) => {
  const cell = (cols: string) => cellIndex(layout, cols)
  const spec = (types: Record<string, ArgType>, body: string, perRow = false): KernelSpec => ({
    source: `function (${Object.keys(types).join(", ")}) {${body}}`,
    types,
    perRow,
  })
  return {
    // out[i,j] = Σp a[i,p]·b[p,j]
    matmul: spec(
      { a: A, b: A, k: I, n: I },
      `${cell("n")}
      let s = 0;
      for (let p = 0; p < k; p++) { s += a[i * k + p] * b[p * n + j]; }
      return s;`,
    ),
    // out[i,j] = Σp a[i,p]·b[j,p]
    matmulTransB: spec(
      { a: A, b: A, k: I, n: I },
      `${cell("n")}
      let s = 0;
      for (let p = 0; p < k; p++) { s += a[i * k + p] * b[j * k + p]; }
      return s;`,
    ),
    // out[i,j] = Σp a[p,i]·b[p,j]
    matmulTransA: spec(
      { a: A, b: A, m: I, k: I, n: I },
      `${cell("n")}
      let s = 0;
      for (let p = 0; p < k; p++) { s += a[p * m + i] * b[p * n + j]; }
      return s;`,
    ),
    // 1/rms of row this.thread.x
    rmsInv: spec(
      { x: A, d: I, eps: "Float" },
      `const o = this.thread.x * d;
      let ss = 0;
      for (let j = 0; j < d; j++) { const v = x[o + j]; ss += v * v; }
      return 1 / Math.sqrt(ss / d + eps);`,
      true,
    ),
    rmsScale: spec(
      { x: A, inv: A, gain: A, d: I },
      `${cell("d")}
      return x[i * d + j] * inv[i] * gain[j];`,
    ),
    // log-sum-exp of row this.thread.x. The two loops need distinct counters: gpu.js cpu mode
    // declares both as one `let user_j` ("Identifier 'user_j' has already been declared").
    logSumExp: spec(
      { x: A, n: I },
      `const o = this.thread.x * n;
      let mx = x[o];
      for (let j = 1; j < n; j++) { mx = Math.max(mx, x[o + j]); }
      let s = 0;
      for (let q = 0; q < n; q++) { s += Math.exp(x[o + q] - mx); }
      return mx + Math.log(s);`,
      true,
    ),
    logSoftmaxSub: spec(
      { x: A, lse: A, n: I },
      `${cell("n")}
      return x[i * n + j] - lse[i];`,
    ),
  }
}

type KernelName = keyof ReturnType<typeof specs>

/** Copies a kernel result ([cols] or [rows] 1-D, or rows of cols) into the first rows·cols of out. */
const copyOut = (result: KernelOutput, out: Floats, rows: number, cols: number): void => {
  if (result instanceof Float32Array) {
    out.set(result.length === rows * cols ? result : result.subarray(0, rows * cols))
    return
  }
  if (Array.isArray(result) && result.length === rows) {
    for (let i = 0; i < rows; i++) {
      const row = result[i]
      if (!(row instanceof Float32Array)) break
      out.set(row, i * cols)
      if (i === rows - 1) return
    }
  }
  throw new Error(`gpu.js returned an unexpected result for a ${rows}×${cols} output`)
}

export const makeGpuJsKernels = (mode: GpuJsMode, options: GpuJsOptions = {}): GpuJsKernels => {
  const strategy = options.strategy ?? DEFAULTS[mode].strategy
  const layout = options.layout ?? DEFAULTS[mode].layout
  const cacheSize = Math.max(1, options.cacheSize ?? 64)
  const gpu = new GPU({ mode })
  const source = specs(layout)

  // ---- compiled kernels
  const cached = new Map<string, IKernelRunShortcut>()
  const dynamic = new Map<KernelName, { kernel: IKernelRunShortcut; output: string }>()

  const create = (name: KernelName, output: number[], resizable: boolean): IKernelRunShortcut =>
    gpu
      .createKernel(source[name].source, {
        output,
        argumentTypes: source[name].types,
        dynamicOutput: resizable,
        dynamicArguments: resizable,
        // cpu mode: every call writes into one result array allocated at build (we copy it out
        // at once). webasm returns a fresh copy of its output region either way.
        pipeline: mode === "cpu" && !resizable,
        immutable: false,
      })
      // not in gpu.js's IGPUKernelSettings type, hence the setter
      .setLoopMaxIterations(LOOP_MAX)

  /** Runs kernel `name` over `rows`×`cols` cells (one per row for per-row kernels). */
  const run = (
    name: KernelName,
    rows: number,
    cols: number,
    shapeKey: string,
    args: KernelVariable[],
  ): KernelOutput => {
    const perRow = source[name].perRow
    const output = perRow ? [rows] : layout === "2d" ? [cols, rows] : [rows * cols]
    if (strategy === "cache") {
      const key = `${name}|${output.join("x")}|${shapeKey}`
      let kernel = cached.get(key)
      if (kernel === undefined) {
        kernel = create(name, output, false)
        cached.set(key, kernel)
        for (const [oldKey, old] of cached) {
          if (cached.size <= cacheSize) break
          cached.delete(oldKey)
          old.destroy()
        }
      } else {
        // Map order is the LRU order: refresh on hit.
        cached.delete(key)
        cached.set(key, kernel)
      }
      return kernel(...args)
    }
    let entry = dynamic.get(name)
    if (entry === undefined) {
      const kernel = create(name, output, true)
      raiseModuleCache(kernel, cacheSize)
      entry = { kernel, output: output.join("x") }
      dynamic.set(name, entry)
    } else if (entry.output !== output.join("x")) {
      entry.kernel.setOutput(output)
      entry.output = output.join("x")
    }
    return entry.kernel(...args)
  }

  // ---- Float64 → Float32, once per call, into reused scratch buffers
  const scratch: Float32Array[] = []
  const f32 = (x: Floats, length: number, slot: number): Float32Array => {
    if (x instanceof Float32Array) return x.length === length ? x : x.subarray(0, length)
    let buf = scratch[slot]
    if (buf === undefined || buf.length < length) {
      buf = new Float32Array(Math.max(length, (buf?.length ?? 0) * 2))
      scratch[slot] = buf
    }
    const view = buf.length === length ? buf : buf.subarray(0, length)
    view.set(x.length === length ? x : x.subarray(0, length))
    return view
  }

  return {
    name: `gpu.js/${mode}`,
    mode,
    strategy,
    layout,

    matmul(a, b, m, k, n, out) {
      const r = run("matmul", m, n, `${m},${k},${n}`, [f32(a, m * k, 0), f32(b, k * n, 1), k, n])
      copyOut(r, out, m, n)
    },

    matmulTransB(a, b, m, k, n, out) {
      const args = [f32(a, m * k, 0), f32(b, n * k, 1), k, n]
      copyOut(run("matmulTransB", m, n, `${m},${k},${n}`, args), out, m, n)
    },

    matmulTransA(a, b, m, k, n, out) {
      const args = [f32(a, k * m, 0), f32(b, k * n, 1), m, k, n]
      copyOut(run("matmulTransA", m, n, `${m},${k},${n}`, args), out, m, n)
    },

    rmsNorm(x, gain, rows, d, eps, out, invRms) {
      const xs = f32(x, rows * d, 0)
      const inv = run("rmsInv", rows, 1, `${rows},${d}`, [xs, d, eps])
      if (!(inv instanceof Float32Array)) throw new Error("gpu.js returned no 1/rms row vector")
      const scaled = run("rmsScale", rows, d, `${rows},${d}`, [xs, inv, f32(gain, d, 1), d])
      copyOut(scaled, out, rows, d)
      copyOut(inv, invRms, rows, 1)
    },

    logSoftmaxRows(x, rows, n, out) {
      const xs = f32(x, rows * n, 0)
      const lse = run("logSumExp", rows, 1, `${rows},${n}`, [xs, n])
      if (!(lse instanceof Float32Array)) throw new Error("gpu.js returned no log-sum-exp vector")
      copyOut(run("logSoftmaxSub", rows, n, `${rows},${n}`, [xs, lse, n]), out, rows, n)
    },

    compiledCount: () => cached.size + dynamic.size,

    fallbacks: () =>
      [...cached.values(), ...[...dynamic.values()].map((e) => e.kernel)].flatMap((k) =>
        k.kernel.fallbackReason === null || k.kernel.fallbackReason === undefined
          ? []
          : [k.kernel.fallbackReason],
      ),

    destroy() {
      for (const kernel of cached.values()) kernel.destroy()
      for (const { kernel } of dynamic.values()) kernel.destroy()
      cached.clear()
      dynamic.clear()
      scratch.length = 0
    },
  }
}

/** webasm keeps at most `moduleCacheLimit` (default 8) built modules per kernel. */
const raiseModuleCache = (kernel: IKernelRunShortcut, limit: number): void => {
  const inner: object = kernel.kernel
  if ("moduleCacheLimit" in inner) Object.assign(inner, { moduleCacheLimit: limit })
}

/**
 * Whether gpu.js could run WebGPU kernels here (`navigator.gpu` with an adapter). The Kernels
 * interface is synchronous and WebGPU readback is not, so there is no WebGPU Kernels: using it
 * would need an async forward pass. Node 20 has no `navigator`; the `webgpu` package's Dawn
 * binary would have to provide it (see MEASUREMENTS.md for why that does not load here).
 */
export const webGpuAvailable = async (): Promise<boolean> => {
  try {
    return await GPU.isWebGPUAvailable()
  } catch {
    return false
  }
}
