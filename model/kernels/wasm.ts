/**
 * A hand-assembled WebAssembly module with one f32x4 SIMD matrix product, and the bytes of it.
 *
 *   gemm(a, b, out, m, k, n, sai, sap): out[i, j] = Σ_p a[i·sai + p·sap] · b[p·n + j]
 *
 * (pointers are byte offsets into the imported memory `env.mem`; sai/sap are element strides of
 * a, so the same function does a·b, with sai = k and sap = 1, and aᵀ·b, with sai = 1 and sap = m).
 * Blocks of 4 rows × 8 columns keep 8 f32x4 accumulators in registers over the whole reduction;
 * the edges use 4 columns, then scalar columns, and single rows. Every output cell is computed the
 * same way wherever it falls: acc = 0, then for p = 0, 1, … acc = f32(acc + f32(a·b)) (IEEE
 * binary32, no fused multiply-add), so a row's result never depends on how many rows were
 * computed with it, and `gemmJs` below reproduces it bit for bit.
 *
 * There is no assembler dependency: the module is written out by the small emitter below
 * (WebAssembly 2.0 binary format, SIMD opcodes under the 0xfd prefix).
 */

const I32 = 0x7f
const F32 = 0x7d
const V128 = 0x7b

const op = {
  block: 0x02,
  loop: 0x03,
  br: 0x0c,
  brIf: 0x0d,
  end: 0x0b,
  localGet: 0x20,
  localSet: 0x21,
  i32Load: 0x28,
  f32Load: 0x2a,
  i32Store: 0x36,
  f32Store: 0x38,
  i32Const: 0x41,
  f32Const: 0x43,
  i32Eqz: 0x45,
  i32LtU: 0x49,
  i32GtU: 0x4b,
  i32GeU: 0x4f,
  i32Add: 0x6a,
  i32Sub: 0x6b,
  i32Mul: 0x6c,
  i32Shl: 0x74,
  f32Add: 0x92,
  f32Mul: 0x94,
  simd: 0xfd,
} as const
const simd = {
  v128Load: 0,
  v128Store: 11,
  v128Const: 12,
  f32x4Splat: 19,
  f32x4Add: 228,
  f32x4Mul: 230,
}

const uleb = (value: number): number[] => {
  const out: number[] = []
  let v = value >>> 0
  do {
    let byte = v & 0x7f
    v >>>= 7
    if (v !== 0) byte |= 0x80
    out.push(byte)
  } while (v !== 0)
  return out
}

const sleb = (value: number): number[] => {
  const out: number[] = []
  let v = value | 0
  for (;;) {
    const byte = v & 0x7f
    v >>= 7
    if ((v === 0 && (byte & 0x40) === 0) || (v === -1 && (byte & 0x40) !== 0)) {
      out.push(byte)
      return out
    }
    out.push(byte | 0x80)
  }
}

/** Emits one function body; locals are allocated by type and referred to by index. */
class Body {
  readonly code: number[] = []
  private readonly extra: number[] = []

  constructor(private readonly params: number) {}

  local(type: number): number {
    this.extra.push(type)
    return this.params + this.extra.length - 1
  }

  get(i: number) {
    this.code.push(op.localGet, ...uleb(i))
  }
  set(i: number) {
    this.code.push(op.localSet, ...uleb(i))
  }
  i32(v: number) {
    this.code.push(op.i32Const, ...sleb(v))
  }
  raw(...bytes: number[]) {
    this.code.push(...bytes)
  }
  simd(opcode: number, ...imm: number[]) {
    this.code.push(op.simd, ...uleb(opcode), ...imm)
  }
  /** local = local + delta (an i32 local or constant). */
  addTo(local: number, delta: number | { local: number }) {
    this.get(local)
    if (typeof delta === "number") this.i32(delta)
    else this.get(delta.local)
    this.raw(op.i32Add)
    this.set(local)
  }
  /** while (cond) { body }: cond pushes an i32. */
  whileLoop(cond: () => void, body: () => void) {
    this.raw(op.block, 0x40, op.loop, 0x40)
    cond()
    this.raw(op.i32Eqz, op.brIf, 1)
    body()
    this.raw(op.br, 0, op.end, op.end)
  }

  encode(): number[] {
    const groups: number[] = []
    let count = 0
    for (let i = 0; i < this.extra.length; i++) {
      const type = this.extra[i] as number
      if (i > 0 && type === this.extra[i - 1]) {
        groups[groups.length - 2] = (groups[groups.length - 2] as number) + 1
        continue
      }
      groups.push(1, type)
      count++
    }
    const locals: number[] = [...uleb(count)]
    for (let g = 0; g < groups.length; g += 2)
      locals.push(...uleb(groups[g] as number), groups[g + 1] as number)
    const body = [...locals, ...this.code, op.end]
    return [...uleb(body.length), ...body]
  }
}

const section = (id: number, content: number[]): number[] => [
  id,
  ...uleb(content.length),
  ...content,
]
const vec = (items: number[][]): number[] => [...uleb(items.length), ...items.flat()]
const name = (s: string): number[] => {
  const bytes = [...new TextEncoder().encode(s)]
  return [...uleb(bytes.length), ...bytes]
}

/** The gemm function's body. */
const gemmBody = (): Body => {
  // params: a b out m k n sai sap
  const [A, B, OUT, M, K, N, SAI, SAP] = [0, 1, 2, 3, 4, 5, 6, 7]
  const f = new Body(8)
  const i = f.local(I32)
  const j = f.local(I32)
  const p = f.local(I32)
  const ap = [f.local(I32), f.local(I32), f.local(I32), f.local(I32)]
  const bp = f.local(I32)
  const ptr = f.local(I32)
  const sai4 = f.local(I32)
  const sap4 = f.local(I32)
  const nb = f.local(I32)
  const acc: number[] = []
  for (let x = 0; x < 8; x++) acc.push(f.local(V128))
  const s = f.local(V128)
  const bv = [f.local(V128), f.local(V128)]
  const accf = [f.local(F32), f.local(F32), f.local(F32), f.local(F32)]

  const shl2 = (local: number, into: number) => {
    f.get(local)
    f.i32(2)
    f.raw(op.i32Shl)
    f.set(into)
  }
  shl2(SAI, sai4)
  shl2(SAP, sap4)
  shl2(N, nb)

  /** One block of R rows × C columns (C = 8 or 4 vector columns, 1 = scalar) at (i, j). */
  const block = (R: number, C: number) => {
    const vectors = C / 4
    for (let r = 0; r < R; r++) {
      // ap[r] = a + ((i + r) · sai) << 2
      f.get(i)
      if (r > 0) {
        f.i32(r)
        f.raw(op.i32Add)
      }
      f.get(SAI)
      f.raw(op.i32Mul)
      f.i32(2)
      f.raw(op.i32Shl)
      f.get(A)
      f.raw(op.i32Add)
      f.set(ap[r] as number)
    }
    // bp = b + j << 2
    f.get(j)
    f.i32(2)
    f.raw(op.i32Shl)
    f.get(B)
    f.raw(op.i32Add)
    f.set(bp)
    for (let r = 0; r < R; r++) {
      if (C === 1) {
        f.raw(op.f32Const, 0, 0, 0, 0)
        f.set(accf[r] as number)
      } else
        for (let c = 0; c < vectors; c++) {
          f.simd(simd.v128Const, ...new Array<number>(16).fill(0))
          f.set(acc[r * 2 + c] as number)
        }
    }
    f.get(K)
    f.set(p)
    f.whileLoop(
      () => f.get(p),
      () => {
        if (C === 1) {
          for (let r = 0; r < R; r++) {
            f.get(accf[r] as number)
            f.get(ap[r] as number)
            f.raw(op.f32Load, 2, 0)
            f.get(bp)
            f.raw(op.f32Load, 2, 0)
            f.raw(op.f32Mul, op.f32Add)
            f.set(accf[r] as number)
          }
        } else {
          for (let c = 0; c < vectors; c++) {
            f.get(bp)
            f.simd(simd.v128Load, 2, ...uleb(16 * c))
            f.set(bv[c] as number)
          }
          for (let r = 0; r < R; r++) {
            f.get(ap[r] as number)
            f.raw(op.f32Load, 2, 0)
            f.simd(simd.f32x4Splat)
            f.set(s)
            for (let c = 0; c < vectors; c++) {
              const a = acc[r * 2 + c] as number
              f.get(a)
              f.get(s)
              f.get(bv[c] as number)
              f.simd(simd.f32x4Mul)
              f.simd(simd.f32x4Add)
              f.set(a)
            }
          }
        }
        for (let r = 0; r < R; r++) f.addTo(ap[r] as number, { local: sap4 })
        f.addTo(bp, { local: nb })
        f.addTo(p, -1)
      },
    )
    for (let r = 0; r < R; r++) {
      // ptr = out + ((i + r) · n + j) << 2
      f.get(i)
      if (r > 0) {
        f.i32(r)
        f.raw(op.i32Add)
      }
      f.get(N)
      f.raw(op.i32Mul)
      f.get(j)
      f.raw(op.i32Add)
      f.i32(2)
      f.raw(op.i32Shl)
      f.get(OUT)
      f.raw(op.i32Add)
      f.set(ptr)
      if (C === 1) {
        f.get(ptr)
        f.get(accf[r] as number)
        f.raw(op.f32Store, 2, 0)
      } else
        for (let c = 0; c < vectors; c++) {
          f.get(ptr)
          f.get(acc[r * 2 + c] as number)
          f.simd(simd.v128Store, 2, ...uleb(16 * c))
        }
    }
  }

  /** Pushes (x + step ≤ limit) as an i32, for unsigned x, step, limit. */
  const fits = (x: number, step: number, limit: number) => () => {
    f.get(x)
    f.i32(step)
    f.raw(op.i32Add)
    f.get(limit)
    f.raw(op.i32GtU, op.i32Eqz)
  }

  f.i32(0)
  f.set(i)
  for (const R of [4, 1]) {
    f.whileLoop(fits(i, R, M), () => {
      f.i32(0)
      f.set(j)
      for (const C of [8, 4, 1]) {
        f.whileLoop(fits(j, C, N), () => {
          block(R, C)
          f.addTo(j, C)
        })
      }
      f.addTo(i, R)
    })
  }
  return f
}

/** transpose(src, dst, rows, cols): dst[c · rows + r] = src[r · cols + c], as 32-bit copies. */
const transposeBody = (): Body => {
  const [SRC, DST, ROWS, COLS] = [0, 1, 2, 3]
  const f = new Body(4)
  const r = f.local(I32)
  const c = f.local(I32)
  const sp = f.local(I32)
  const dp = f.local(I32)
  const step = f.local(I32)
  f.get(ROWS)
  f.i32(2)
  f.raw(op.i32Shl)
  f.set(step)
  f.get(SRC)
  f.set(sp)
  f.i32(0)
  f.set(r)
  f.whileLoop(
    () => {
      f.get(r)
      f.get(ROWS)
      f.raw(op.i32LtU)
    },
    () => {
      // dp = dst + r << 2
      f.get(r)
      f.i32(2)
      f.raw(op.i32Shl)
      f.get(DST)
      f.raw(op.i32Add)
      f.set(dp)
      f.get(COLS)
      f.set(c)
      f.whileLoop(
        () => f.get(c),
        () => {
          f.get(dp)
          f.get(sp)
          f.raw(op.i32Load, 2, 0)
          f.raw(op.i32Store, 2, 0)
          f.addTo(sp, 4)
          f.addTo(dp, { local: step })
          f.addTo(c, -1)
        },
      )
      f.addTo(r, 1)
    },
  )
  return f
}

/**
 * The module's bytes: imports `env.mem` (a memory of at least one page), exports `gemm` and
 * `transpose`.
 */
export const gemmModuleBytes = (): Uint8Array<ArrayBuffer> => {
  const gemmType = [0x60, ...uleb(8), ...new Array<number>(8).fill(I32), 0]
  const transposeType = [0x60, ...uleb(4), ...new Array<number>(4).fill(I32), 0]
  const importMemory = [...name("env"), ...name("mem"), 0x02, 0x00, ...uleb(1)]
  return new Uint8Array([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(1, vec([gemmType, transposeType])),
    ...section(2, vec([importMemory])),
    ...section(3, vec([uleb(0), uleb(1)])),
    ...section(
      7,
      vec([
        [...name("gemm"), 0x00, 0],
        [...name("transpose"), 0x00, 1],
      ]),
    ),
    ...section(10, vec([gemmBody().encode(), transposeBody().encode()])),
  ])
}

/**
 * gemm in plain JavaScript with the wasm function's exact arithmetic (f32 products and sums in
 * the same order): for calls too small to be worth copying into wasm memory.
 */
export const gemmJs = (
  a: Float32Array,
  b: Float32Array,
  out: Float32Array,
  m: number,
  k: number,
  n: number,
  sai: number,
  sap: number,
): void => {
  const fround = Math.fround
  out.fill(0, 0, m * n)
  for (let i = 0; i < m; i++) {
    const o = i * n
    for (let p = 0; p < k; p++) {
      const av = a[i * sai + p * sap] as number
      const bp = p * n
      for (let j = 0; j < n; j++)
        out[o + j] = (out[o + j] as number) + fround(av * (b[bp + j] as number))
    }
  }
}
