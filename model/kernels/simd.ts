/**
 * The `simd` backend: the three matrix products on a hand-assembled WebAssembly f32x4 kernel
 * (model/kernels/wasm.ts), 15-35× the reference on the model's shapes; Float64 calls and the row
 * kernels (RMSNorm, log-softmax: one pass over memory, nothing for SIMD to win) run on the
 * reference. Float32 products accumulate in f32 in a fixed order per output cell, the same in wasm
 * and in the JavaScript used for calls too small to be worth copying into wasm memory, so a row's
 * result never depends on the rows computed with it (prefill versus decode, batch of 1 or 8).
 *
 * Each call copies its operands into the instance's own wasm memory (grown as needed) and the
 * product out again: a memcpy, small next to the product (1/k of it for the left operand, 1/m for
 * the right). An instance is single-threaded; every worker thread makes its own.
 */
import type { Floats, Kernels } from "./kernels.ts"
import { jsCausalSoftmax, jsSilu, referenceKernels } from "./reference.ts"
import { gemmJs, gemmModuleBytes } from "./wasm.ts"

export interface SimdOptions {
  /**
   * Products of fewer multiply-adds (m·k·n) than this run in JavaScript with the same
   * arithmetic (default 4096): below it, the wasm call and the copies cost more than they save.
   */
  readonly minWork?: number
}

export interface SimdKernels extends Kernels {
  /** Calls that ran in wasm and in JavaScript, for tests and benchmarks. */
  readonly calls: { wasm: number; js: number }
}

let compiled: WebAssembly.Module | undefined
const gemmModule = (): WebAssembly.Module => {
  compiled ??= new WebAssembly.Module(gemmModuleBytes())
  return compiled
}

type Gemm = (
  a: number,
  b: number,
  out: number,
  m: number,
  k: number,
  n: number,
  sai: number,
  sap: number,
) => void

const PAGE = 65536

export const makeSimdKernels = (options: SimdOptions = {}): SimdKernels => {
  const minWork = Math.max(0, options.minWork ?? 4096)
  const memory = new WebAssembly.Memory({ initial: 16 })
  const instance = new WebAssembly.Instance(gemmModule(), { env: { mem: memory } })
  const gemm = instance.exports.gemm as Gemm
  const transpose = instance.exports.transpose as (
    src: number,
    dst: number,
    rows: number,
    cols: number,
  ) => void
  const softmaxRows = instance.exports.softmaxRows as (
    ptr: number,
    rows: number,
    width: number,
    first: number,
    scale: number,
  ) => void
  const siluRows = instance.exports.silu as (h: number, act: number, sig: number, n: number) => void
  let heap = new Float32Array(memory.buffer)
  const calls = { wasm: 0, js: 0 }
  let transposed = new Float32Array(0)

  /** Makes room for `floats` f32 values (from offset 0) and returns the heap view. */
  const reserve = (floats: number): Float32Array => {
    const bytes = floats * 4
    if (bytes > memory.buffer.byteLength) {
      memory.grow(Math.ceil((bytes - memory.buffer.byteLength) / PAGE))
      heap = new Float32Array(memory.buffer)
    }
    return heap
  }
  /** 16-byte aligned float offsets. */
  const align = (floats: number) => (floats + 3) & ~3

  /**
   * out[m, n] = Σ_p a(i, p) · b[p, n] with a(i, p) = a[i·sai + p·sap]; `aLen` elements of a are
   * read, `bT` is set when b arrives as [n, k] and must be transposed on the way in.
   */
  const run = (
    a: Float32Array,
    aLen: number,
    b: Float32Array,
    bT: boolean,
    m: number,
    k: number,
    n: number,
    sai: number,
    sap: number,
    out: Float32Array,
  ): void => {
    if (m === 0 || n === 0) return
    if (m * k * n < minWork) {
      calls.js++
      let bb = b
      if (bT) {
        if (transposed.length < k * n) transposed = new Float32Array(k * n)
        for (let j = 0; j < n; j++)
          for (let p = 0; p < k; p++) transposed[p * n + j] = b[j * k + p] as number
        bb = transposed
      }
      gemmJs(a, bb, out, m, k, n, sai, sap)
      return
    }
    calls.wasm++
    const aOff = 0
    const bOff = align(aLen)
    const oOff = bOff + align(k * n)
    // b as given ([n, k]) goes after the output, then is transposed into place.
    const rawOff = oOff + align(m * n)
    const h = reserve(bT ? rawOff + k * n : oOff + m * n)
    h.set(a.subarray(0, aLen), aOff)
    if (bT) {
      h.set(b.subarray(0, k * n), rawOff)
      transpose(rawOff * 4, bOff * 4, n, k)
    } else h.set(b.subarray(0, k * n), bOff)
    gemm(aOff * 4, bOff * 4, oOff * 4, m, k, n, sai, sap)
    out.set(h.subarray(oOff, oOff + m * n))
  }

  const f32 = (x: Floats): x is Float32Array => x instanceof Float32Array

  return {
    name: "simd",
    calls,
    matmul(a, b, m, k, n, out) {
      if (f32(a) && f32(b) && f32(out)) run(a, m * k, b, false, m, k, n, k, 1, out)
      else referenceKernels.matmul(a, b, m, k, n, out)
    },
    matmulTransB(a, b, m, k, n, out) {
      if (f32(a) && f32(b) && f32(out)) run(a, m * k, b, true, m, k, n, k, 1, out)
      else referenceKernels.matmulTransB(a, b, m, k, n, out)
    },
    matmulTransA(a, b, m, k, n, out) {
      if (f32(a) && f32(b) && f32(out)) run(a, k * m, b, false, m, k, n, 1, m, out)
      else referenceKernels.matmulTransA(a, b, m, k, n, out)
    },
    rmsNorm(x, gain, rows, d, eps, out, invRms) {
      referenceKernels.rmsNorm(x, gain, rows, d, eps, out, invRms)
    },
    logSoftmaxRows(x, rows, n, out) {
      referenceKernels.logSoftmaxRows(x, rows, n, out)
    },
    causalSoftmax(x, rows, width, first, scale) {
      if (!f32(x)) return jsCausalSoftmax(x, rows, width, first, scale)
      const n = rows * width
      const h = reserve(n)
      h.set(x.subarray(0, n))
      softmaxRows(0, rows, width, first, scale)
      x.set(h.subarray(0, n))
    },
    silu(hIn, n, act, sig) {
      if (!(f32(hIn) && f32(act) && f32(sig))) return jsSilu(hIn, n, act, sig)
      const o = align(n)
      const h = reserve(3 * o)
      h.set(hIn.subarray(0, n))
      siluRows(0, o * 4, 2 * o * 4, n)
      act.set(h.subarray(o, o + n))
      sig.set(h.subarray(2 * o, 2 * o + n))
    },
  }
}
