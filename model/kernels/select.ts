/**
 * Picks the kernels a model runs with: one backend for everything, or (`auto`) a composite that
 * routes each kernel to the backend measured fastest for it on the 2-core dev machine; the
 * numbers are in model/kernels/MEASUREMENTS.md. Since the `simd` backend (a hand-written wasm
 * f32x4 product, model/kernels/simd.ts: 15-35× the reference, 10-25× gpu.js webasm, no build per
 * shape) the three products go there and the row kernels stay on the reference.
 *
 * What `auto` sends to gpu.js when a route names it (not the default any more):
 * - Float32 calls only. gpu.js computes in f32, and a model kept in f64 (gradient checks) must
 *   not be rounded behind its back, so calls with any Float64 array run on the reference.
 * - Big enough calls (`minM`, `minK`): gpu.js has a fixed cost per call (~10 µs), copies every
 *   input into wasm memory and its output out again (so a 1-row product, which reads each weight
 *   once, saves nothing), and a per-cell cost that a short reduction does not amortize.
 * - Warm shapes only. gpu.js builds a kernel per shape (webasm: a wasm module, 1.5-3 ms), worth
 *   it only for a shape that recurs, so a shape runs on the reference until the reference has
 *   done `coldWork` units of work on it (about what the build costs), then on gpu.js: prefill
 *   shapes move after a call or two, odd expert batch sizes seen a few times never pay a build.
 */
import { makeGpuJsKernels } from "./gpujs.ts"
import type { Floats, Kernels } from "./kernels.ts"
import { referenceKernels } from "./reference.ts"
import { makeSimdKernels } from "./simd.ts"

export type Backend = "reference" | "webasm" | "cpu" | "simd"
export type KernelChoice = "auto" | Backend
export type KernelName = "matmul" | "matmulTransB" | "matmulTransA" | "rmsNorm" | "logSoftmaxRows"

export const KERNEL_NAMES: ReadonlyArray<KernelName> = [
  "matmul",
  "matmulTransB",
  "matmulTransA",
  "rmsNorm",
  "logSoftmaxRows",
]

export interface Route {
  readonly backend: Backend
  /** Fewer output rows (m; rows for the row kernels) than this: the reference runs instead. */
  readonly minM?: number
  /** A shorter reduction (k; the row width for the row kernels): the reference runs instead. */
  readonly minK?: number
}

export type RouteTable = Readonly<Record<KernelName, Route>>

/**
 * From bench/kernels.ts on the dev machine (MEASUREMENTS.md): simd runs the products 15-35×
 * faster than the reference at 64-256 rows (13-15 G multiply-adds/s against 0.3-0.5) and at least
 * as fast at 1 row (it hands products under 4096 multiply-adds to JavaScript with the same
 * arithmetic). gpu.js webasm won 1.14-1.46× over the reference on matmul/matmulTransA from 4 rows
 * on, so simd supersedes it. The row kernels stay on the reference: one pass over memory.
 */
export const MEASURED_ROUTES: RouteTable = {
  matmul: { backend: "simd" },
  matmulTransB: { backend: "simd" },
  matmulTransA: { backend: "simd" },
  rmsNorm: { backend: "reference" },
  logSoftmaxRows: { backend: "reference" },
}

export interface SelectOptions {
  /**
   * Multiply-adds a new shape does on the reference before it moves to gpu.js (default
   * 5 000 000: at the 0.3-0.5 ns per multiply-add webasm saves, about the 1.5-3 ms a webasm
   * module build costs). 0: gpu.js from the first call.
   */
  readonly coldWork?: number
  /** Route Float64 calls too (rounded to f32 by gpu.js). Default false. */
  readonly routeFloat64?: boolean
}

/** The `auto` composite; `routed` counts calls per backend that actually ran them. */
export interface AutoKernels extends Kernels {
  readonly routes: RouteTable
  readonly routed: Readonly<Record<Backend, number>>
}

const describe = (name: KernelName, route: Route): string => {
  const limits: string[] = []
  if (route.backend !== "reference") {
    if ((route.minM ?? 0) > 1) limits.push(`m≥${route.minM}`)
    if ((route.minK ?? 0) > 1) limits.push(`k≥${route.minK}`)
  }
  return `${name}=${route.backend}${limits.length > 0 ? `(${limits.join(",")})` : ""}`
}

const isF32 = (x: Floats): boolean => x instanceof Float32Array

/** The composite `auto`: each kernel on its backend in `measured` over MEASURED_ROUTES. */
export const makeAutoKernels = (
  measured?: Partial<RouteTable>,
  options: SelectOptions = {},
): AutoKernels => {
  const routes: RouteTable = { ...MEASURED_ROUTES, ...measured }
  const coldWork = Math.max(0, options.coldWork ?? 5_000_000)
  const routeFloat64 = options.routeFloat64 ?? false
  const routed: Record<Backend, number> = { reference: 0, webasm: 0, cpu: 0, simd: 0 }
  const backends = new Map<Backend, Kernels>([["reference", referenceKernels]])
  const backend = (b: Backend): Kernels => {
    let k = backends.get(b)
    if (k === undefined) {
      k = b === "simd" ? makeSimdKernels() : makeGpuJsKernels(b === "cpu" ? "cpu" : "webasm")
      backends.set(b, k)
    }
    return k
  }
  const simd = (): Kernels => backend("simd")
  // Calls seen per cold shape; cleared wholesale past a bound (a model has few shapes).
  const seen = new Map<string, number>()
  /** The backend for one call of shape m×k(×n); f32: whether all its arrays are Float32. */
  const pick = (name: KernelName, f32: boolean, m: number, k: number, n = 1): Kernels => {
    const route = routes[name]
    const work = m * k * n
    let b = route.backend
    if (
      b !== "reference" &&
      (m < (route.minM ?? 0) || k < (route.minK ?? 0) || (!f32 && !routeFloat64))
    ) {
      b = "reference"
    }
    // simd builds nothing per shape: no warm-up on the reference.
    if (b !== "reference" && b !== "simd" && coldWork > 0) {
      const key = `${name}|${m},${k},${n}`
      const calls = seen.get(key) ?? 0
      if (calls * work < coldWork) {
        if (seen.size >= 4096) seen.clear()
        seen.set(key, calls + 1)
        b = "reference"
      }
    }
    routed[b]++
    return backend(b)
  }

  return {
    name: `auto[${KERNEL_NAMES.map((n) => describe(n, routes[n])).join(",")}]`,
    routes,
    routed,
    matmul(a, b, m, k, n, out) {
      const f32 = isF32(a) && isF32(b) && isF32(out)
      pick("matmul", f32, m, k, n).matmul(a, b, m, k, n, out)
    },
    matmulTransB(a, b, m, k, n, out) {
      const f32 = isF32(a) && isF32(b) && isF32(out)
      pick("matmulTransB", f32, m, k, n).matmulTransB(a, b, m, k, n, out)
    },
    matmulTransA(a, b, m, k, n, out) {
      const f32 = isF32(a) && isF32(b) && isF32(out)
      pick("matmulTransA", f32, m, k, n).matmulTransA(a, b, m, k, n, out)
    },
    rmsNorm(x, gain, rows, d, eps, out, invRms) {
      const f32 = isF32(x) && isF32(gain) && isF32(out) && isF32(invRms)
      pick("rmsNorm", f32, rows, d).rmsNorm(x, gain, rows, d, eps, out, invRms)
    },
    logSoftmaxRows(x, rows, n, out) {
      const f32 = isF32(x) && isF32(out)
      pick("logSoftmaxRows", f32, rows, n).logSoftmaxRows(x, rows, n, out)
    },
    // The attention softmax and SiLU follow the products: simd's wasm versions when matmul is
    // routed to simd, else the model's plain loops (Math.exp).
    ...(routes.matmul.backend === "simd"
      ? {
          causalSoftmax(x: Floats, rows: number, width: number, first: number, scale: number) {
            simd().causalSoftmax?.(x, rows, width, first, scale)
          },
          silu(h: Floats, n: number, act: Floats, sig: Floats) {
            simd().silu?.(h, n, act, sig)
          },
        }
      : {}),
  }
}

/**
 * `reference`, `webasm`, `cpu`, `simd`: that backend for every kernel (webasm and cpu compute in
 * f32; simd computes f32 calls in f32 and hands f64 calls and the row kernels to the reference).
 * `auto`: makeAutoKernels, named like `auto[matmul=simd,…,rmsNorm=reference,…]`.
 */
export const selectKernels = (
  choice: KernelChoice,
  measured?: Partial<RouteTable>,
  options?: SelectOptions,
): Kernels => {
  if (choice === "reference") return referenceKernels
  if (choice === "webasm" || choice === "cpu") return makeGpuJsKernels(choice)
  if (choice === "simd") return makeSimdKernels()
  return makeAutoKernels(measured, options)
}
