import { afterAll, describe, expect, it } from "vitest"
import { type GpuJsKernels, makeGpuJsKernels } from "./gpujs.ts"
import type { Floats, Kernels } from "./kernels.ts"
import { jsCausalSoftmax, jsSilu, referenceKernels as ref } from "./reference.ts"
import { KERNEL_NAMES, MEASURED_ROUTES, makeAutoKernels, selectKernels } from "./select.ts"
import { makeSimdKernels } from "./simd.ts"
import { gemmJs } from "./wasm.ts"

/** Mulberry32: reproducible inputs without depending on the model's generator. */
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

type Precision = "f32" | "f64"
const alloc = (p: Precision, n: number): Floats =>
  p === "f32" ? new Float32Array(n) : new Float64Array(n)
const random = (p: Precision, n: number, next: () => number, scale = 1): Floats => {
  const a = alloc(p, n)
  for (let i = 0; i < n; i++) a[i] = (next() * 2 - 1) * scale
  return a
}
const nanFilled = (p: Precision, n: number): Floats => alloc(p, n).fill(Number.NaN)

/**
 * f32 tolerance: relative 1e-5, plus 1e-6 per term of the reduction behind each value (inputs are
 * in [-1, 1], so a k-term f32 sum is off by far less than k·1e-6).
 */
const expectClose = (got: Floats, want: Floats, terms: number, what: string) => {
  expect(got.length, what).toBe(want.length)
  for (let i = 0; i < want.length; i++) {
    const g = got[i] as number
    const w = want[i] as number
    const tol = 1e-5 * Math.abs(w) + 1e-6 * Math.max(1, terms)
    if (!(Math.abs(g - w) <= tol)) {
      expect.fail(`${what}: element ${i} is ${g}, reference ${w} (tolerance ${tol})`)
    }
  }
}

describe("reference kernels on hand-computed examples", () => {
  // [[1,2,3],[4,5,6]] · [[7,8],[9,10],[11,12]] = [[58,64],[139,154]]
  const product = [58, 64, 139, 154]

  it("matmul: 2×3 · 3×2", () => {
    const out = new Float64Array(4).fill(Number.NaN)
    ref.matmul(
      Float64Array.of(1, 2, 3, 4, 5, 6),
      Float64Array.of(7, 8, 9, 10, 11, 12),
      2,
      3,
      2,
      out,
    )
    expect(Array.from(out)).toEqual(product)
  })

  it("matmulTransB: 2×3 · (2×3)ᵀ", () => {
    const out = new Float64Array(4).fill(Number.NaN)
    ref.matmulTransB(
      Float64Array.of(1, 2, 3, 4, 5, 6),
      Float64Array.of(7, 9, 11, 8, 10, 12),
      2,
      3,
      2,
      out,
    )
    expect(Array.from(out)).toEqual(product)
  })

  it("matmulTransA: (3×2)ᵀ · 3×2", () => {
    const out = new Float64Array(4).fill(Number.NaN)
    ref.matmulTransA(
      Float64Array.of(1, 4, 2, 5, 3, 6),
      Float64Array.of(7, 8, 9, 10, 11, 12),
      2,
      3,
      2,
      out,
    )
    expect(Array.from(out)).toEqual(product)
  })

  it("rmsNorm: rows [2,2,2,2] and [3,-3,3,-3], gain [1,2,3,4]", () => {
    const out = new Float64Array(8).fill(Number.NaN)
    const inv = new Float64Array(2).fill(Number.NaN)
    const gain = Float64Array.of(1, 2, 3, 4)
    ref.rmsNorm(Float64Array.of(2, 2, 2, 2, 3, -3, 3, -3), gain, 2, 4, 0, out, inv)
    // rms 2 and 3
    expect(Array.from(inv)).toEqual([1 / 2, 1 / 3])
    expect(Array.from(out)).toEqual([1, 2, 3, 4, 1, -2, 3, -4])
    // eps inside the root: mean(x²) = 1, + 3 = 4, 1/rms = 1/2
    ref.rmsNorm(Float64Array.of(1, 1, 1, 1), gain, 1, 4, 3, out, inv)
    expect(Array.from(out.subarray(0, 4))).toEqual([0.5, 1, 1.5, 2])
    expect(inv[0]).toBe(0.5)
  })

  it("logSoftmaxRows: [0, ln 3] → [ln ¼, ln ¾], shift-invariant, and stable at 1000", () => {
    const out = new Float64Array(6).fill(Number.NaN)
    ref.logSoftmaxRows(Float64Array.of(0, 0, 0, Math.log(3), 1000, 1000 + Math.log(3)), 3, 2, out)
    const want = [Math.log(0.5), Math.log(0.5), Math.log(0.25), Math.log(0.75)]
    for (let i = 0; i < 4; i++) expect(out[i]).toBeCloseTo(want[i] as number, 14)
    expect(out[4]).toBeCloseTo(Math.log(0.25), 12)
    expect(out[5]).toBeCloseTo(Math.log(0.75), 12)
  })
})

// gpu.js backends in their default configuration (dynamic) and with a compiled kernel per shape
// (cache; in cpu mode that also reuses result arrays), in both layouts, plus the `auto` composite
// with every kernel on webasm from the first call, f64 calls included.
const gpuBackends: GpuJsKernels[] = [
  makeGpuJsKernels("webasm"),
  makeGpuJsKernels("cpu"),
  makeGpuJsKernels("webasm", { strategy: "cache", layout: "1d" }),
  makeGpuJsKernels("cpu", { strategy: "cache", layout: "1d" }),
  makeGpuJsKernels("cpu", { strategy: "cache", layout: "2d" }),
]
const backends: { label: string; kernels: Kernels }[] = [
  { label: "reference", kernels: ref },
  { label: "simd", kernels: makeSimdKernels() },
  { label: "simd, every call in wasm", kernels: makeSimdKernels({ minWork: 0 }) },
  { label: "simd, every call in JavaScript", kernels: makeSimdKernels({ minWork: 1e12 }) },
  { label: "auto", kernels: selectKernels("auto") },
  ...gpuBackends.map((k) => ({ label: `${k.name} ${k.strategy}/${k.layout}`, kernels: k })),
  {
    label: "auto, all on webasm",
    kernels: makeAutoKernels(
      Object.fromEntries(KERNEL_NAMES.map((name) => [name, { backend: "webasm" }])),
      { coldWork: 0, routeFloat64: true },
    ),
  },
]
afterAll(() => {
  for (const k of gpuBackends) k.destroy()
})

// m, k, n: decode (m = 1), non-multiples of 4, k = 1 and n = 1, k past gpu.js's default
// 1000-iteration loop cap.
const MATMUL_SHAPES: ReadonlyArray<readonly [number, number, number]> = [
  [1, 64, 64],
  [3, 5, 7],
  [7, 13, 1],
  [1, 1, 1],
  [17, 64, 130],
  [2, 1100, 3],
]
// rows, width
const ROW_SHAPES: ReadonlyArray<readonly [number, number]> = [
  [1, 64],
  [5, 7],
  [3, 130],
  [2, 1500],
]
const PRECISIONS: ReadonlyArray<Precision> = ["f32", "f64"]

describe.each(backends)("$label against the reference", ({ kernels }) => {
  it.each(PRECISIONS)("matmul, matmulTransB, matmulTransA (%s)", (p) => {
    const next = generator(1)
    for (const [m, k, n] of MATMUL_SHAPES) {
      const shape = `${p} m=${m} k=${k} n=${n}`
      const a = random(p, m * k, next)
      const b = random(p, k * n, next)
      const want = alloc(p, m * n)
      const got = nanFilled(p, m * n)
      ref.matmul(a, b, m, k, n, want)
      kernels.matmul(a, b, m, k, n, got)
      expectClose(got, want, k, `matmul ${shape}`)

      const bt = random(p, n * k, next)
      ref.matmulTransB(a, bt, m, k, n, want)
      got.fill(Number.NaN)
      kernels.matmulTransB(a, bt, m, k, n, got)
      expectClose(got, want, k, `matmulTransB ${shape}`)

      const at = random(p, k * m, next)
      ref.matmulTransA(at, b, m, k, n, want)
      got.fill(Number.NaN)
      kernels.matmulTransA(at, b, m, k, n, got)
      expectClose(got, want, k, `matmulTransA ${shape}`)
    }
  })

  it.each(PRECISIONS)("rmsNorm and logSoftmaxRows (%s)", (p) => {
    const next = generator(2)
    for (const [rows, d] of ROW_SHAPES) {
      const shape = `${p} rows=${rows} width=${d}`
      const x = random(p, rows * d, next, 4)
      const gain = random(p, d, next)
      const want = alloc(p, rows * d)
      const wantInv = alloc(p, rows)
      const got = nanFilled(p, rows * d)
      const gotInv = nanFilled(p, rows)
      ref.rmsNorm(x, gain, rows, d, 1e-5, want, wantInv)
      kernels.rmsNorm(x, gain, rows, d, 1e-5, got, gotInv)
      expectClose(got, want, d, `rmsNorm ${shape}`)
      expectClose(gotInv, wantInv, d, `rmsNorm 1/rms ${shape}`)

      ref.logSoftmaxRows(x, rows, d, want)
      got.fill(Number.NaN)
      kernels.logSoftmaxRows(x, rows, d, got)
      expectClose(got, want, d, `logSoftmaxRows ${shape}`)
    }
  })
})

describe("gpu.js backends", () => {
  it("run on the mode they were asked for (no silent cpu fallback)", () => {
    for (const k of gpuBackends) {
      expect(k.compiledCount(), k.name).toBeGreaterThan(0)
      expect(k.fallbacks(), k.name).toEqual([])
    }
  })

  it("keep at most cacheSize compiled kernels and stay correct past evictions", () => {
    const kernels = makeGpuJsKernels("webasm", { strategy: "cache", cacheSize: 2 })
    try {
      const next = generator(3)
      for (const m of [1, 2, 3, 4, 1, 2]) {
        const a = random("f32", m * 8, next)
        const b = random("f32", 8 * 5, next)
        const want = alloc("f32", m * 5)
        const got = nanFilled("f32", m * 5)
        ref.matmul(a, b, m, 8, 5, want)
        kernels.matmul(a, b, m, 8, 5, got)
        expectClose(got, want, 8, `matmul m=${m}`)
        expect(kernels.compiledCount()).toBeLessThanOrEqual(2)
      }
    } finally {
      kernels.destroy()
    }
  })

  it("read only the first m·k / k·n elements of longer inputs", () => {
    const next = generator(4)
    const a = random("f64", 3 * 4 + 5, next)
    const b = random("f64", 4 * 2 + 3, next)
    const want = alloc("f64", 6)
    ref.matmul(a, b, 3, 4, 2, want)
    for (const k of gpuBackends) {
      const got = nanFilled("f64", 6)
      k.matmul(a, b, 3, 4, 2, got)
      expectClose(got, want, 4, k.name)
    }
  })
})

describe("selectKernels", () => {
  it("forces one backend", () => {
    expect(selectKernels("reference")).toBe(ref)
    expect(selectKernels("webasm").name).toBe("gpu.js/webasm")
    expect(selectKernels("cpu").name).toBe("gpu.js/cpu")
  })

  it("auto lists the backend of every kernel, and takes overrides", () => {
    const auto = selectKernels("auto")
    for (const name of KERNEL_NAMES) {
      expect(auto.name).toContain(`${name}=${MEASURED_ROUTES[name].backend}`)
    }
    expect(selectKernels("auto", { rmsNorm: { backend: "cpu" } }).name).toContain("rmsNorm=cpu")
  })

  it("auto sends the f32 products to simd and everything else to the reference", () => {
    const auto = makeAutoKernels()
    const a = new Float32Array(64 * 64).fill(0.5)
    const out = new Float32Array(64 * 64)
    auto.matmul(a, a, 64, 64, 64, out)
    auto.matmulTransA(a, a, 64, 64, 64, out)
    auto.matmulTransB(a, a, 64, 64, 64, out)
    auto.matmul(new Float64Array(64 * 64), new Float64Array(64 * 64), 64, 64, 64, out)
    auto.rmsNorm(a, a, 64, 64, 1e-5, out, new Float32Array(64))
    expect(auto.routed).toEqual({ reference: 2, webasm: 0, cpu: 0, simd: 3 })
  })

  it("auto keeps cold shapes and f64 calls on the reference, then routes warm f32 shapes", () => {
    // 16×64·64×64 = 65 536 multiply-adds per call: cold for the first 3 calls at coldWork 196 608
    const auto = makeAutoKernels(
      {
        matmul: { backend: "webasm", minM: 4, minK: 32 },
        matmulTransA: { backend: "webasm", minM: 4, minK: 16 },
      },
      { coldWork: 3 * 65_536 },
    )
    const next = generator(5)
    for (const p of PRECISIONS) {
      const a = random(p, 16 * 64, next)
      const b = random(p, 64 * 64, next)
      const want = alloc(p, 16 * 64)
      ref.matmul(a, b, 16, 64, 64, want)
      for (let call = 0; call < 5; call++) {
        const got = nanFilled(p, 16 * 64)
        auto.matmul(a, b, 16, 64, 64, got)
        expectClose(got, want, 64, `${p} call ${call}`)
      }
    }
    // f32: 3 cold calls, then 2 on webasm; f64: all 5 on the reference
    expect(auto.routed).toEqual({ reference: 8, webasm: 2, cpu: 0, simd: 0 })
    // m or k below the table's minimum: the reference however warm
    const a = new Float32Array(64 * 64).fill(0.5)
    const out = new Float32Array(64 * 64)
    for (let call = 0; call < 10; call++) auto.matmul(a, a, 1, 64, 64, out)
    for (let call = 0; call < 10; call++) auto.matmulTransA(a, a, 64, 8, 64, out)
    expect(auto.routed).toEqual({ reference: 28, webasm: 2, cpu: 0, simd: 0 })
  })
})

describe("simd", () => {
  it("wasm and JavaScript paths agree bit for bit, and a row's result does not depend on the rows beside it", () => {
    const wasm = makeSimdKernels({ minWork: 0 })
    const js = makeSimdKernels({ minWork: 1e12 })
    const next = generator(6)
    for (const [m, k, n] of [
      [1, 64, 1024],
      [9, 128, 37],
      [64, 33, 256],
      [5, 1, 9],
    ] as const) {
      const a = random("f32", m * k, next) as Float32Array
      const b = random("f32", k * n, next) as Float32Array
      const bt = random("f32", n * k, next) as Float32Array
      const at = random("f32", k * m, next) as Float32Array
      for (const [label, call] of [
        ["matmul", (kk: Kernels, out: Float32Array) => kk.matmul(a, b, m, k, n, out)],
        ["matmulTransB", (kk: Kernels, out: Float32Array) => kk.matmulTransB(a, bt, m, k, n, out)],
        ["matmulTransA", (kk: Kernels, out: Float32Array) => kk.matmulTransA(at, b, m, k, n, out)],
      ] as const) {
        const w = new Float32Array(m * n)
        const j = new Float32Array(m * n).fill(Number.NaN)
        call(wasm, w)
        call(js, j)
        expect(Array.from(j), `${label} ${m}×${k}×${n}`).toEqual(Array.from(w))
      }
      // Row 0 alone equals row 0 of the batch.
      const one = new Float32Array(n)
      wasm.matmul(a, b, 1, k, n, one)
      const all = new Float32Array(m * n)
      wasm.matmul(a, b, m, k, n, all)
      expect(Array.from(one)).toEqual(Array.from(all.subarray(0, n)))
    }
    expect(wasm.calls.js).toBe(0)
    expect(js.calls.wasm).toBe(0)
  })

  it("causalSoftmax: matches the plain loops within 1e-6 and a row's values do not depend on its place", () => {
    const simd = makeSimdKernels()
    const next = generator(7)
    for (const [rows, width, first] of [
      [1, 1, 0],
      [5, 13, 3],
      [64, 130, 66],
      [3, 9, 20],
    ] as const) {
      const x = random("f32", rows * width, next, 30) as Float32Array
      const got = x.slice()
      const want = x.slice()
      simd.causalSoftmax?.(got, rows, width, first, 0.25)
      jsCausalSoftmax(want, rows, width, first, 0.25)
      expectClose(got, want, 1, `causalSoftmax ${rows}×${width} from ${first}`)
      for (let i = 0; i < rows; i++) {
        const valid = Math.min(first + i + 1, width)
        const alone = x.slice(i * width, i * width + valid)
        simd.causalSoftmax?.(alone, 1, valid, valid - 1, 0.25)
        expect(Array.from(got.subarray(i * width, i * width + valid))).toEqual(Array.from(alone))
        expect(Array.from(got.subarray(i * width + valid, (i + 1) * width))).toEqual(
          new Array<number>(width - valid).fill(0),
        )
      }
    }
  })

  it("silu: matches the plain loops (relative 1e-6), tails included", () => {
    const simd = makeSimdKernels()
    const next = generator(8)
    for (const n of [1, 3, 4, 7, 1029]) {
      const h = random("f32", n, next, 20) as Float32Array
      h[0] = -100
      const act = new Float32Array(n)
      const sig = new Float32Array(n)
      const wantAct = new Float32Array(n)
      const wantSig = new Float32Array(n)
      simd.silu?.(h, n, act, sig)
      jsSilu(h, n, wantAct, wantSig)
      expectClose(act, wantAct, 1, `silu act n=${n}`)
      expectClose(sig, wantSig, 1, `silu sigmoid n=${n}`)
    }
  })

  it("computes f32 products in f32: each cell is a sequential f32 sum of f32 products", () => {
    const a = Float32Array.of(1e8, 1, -1e8, 1)
    const b = Float32Array.of(1, 1, 1, 1)
    const out = new Float32Array(1)
    makeSimdKernels({ minWork: 0 }).matmul(a, b, 1, 4, 1, out)
    const want = new Float32Array(1)
    gemmJs(a, b, want, 1, 4, 1, 4, 1)
    // f32: 1e8 + 1 = 1e8, − 1e8 = 0, + 1 = 1
    expect(out[0]).toBe(1)
    expect(want[0]).toBe(1)
  })
})
