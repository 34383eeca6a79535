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
  f32Sub: 0x93,
  f32Mul: 0x94,
  f32Div: 0x95,
  f32Max: 0x97,
  simd: 0xfd,
} as const
const simd = {
  v128Load: 0,
  v128Store: 11,
  v128Const: 12,
  f32x4Splat: 19,
  f32x4ExtractLane: 31,
  i32x4Shl: 171,
  f32x4Neg: 225,
  f32x4Add: 228,
  f32x4Sub: 229,
  f32x4Mul: 230,
  f32x4Div: 231,
  f32x4Min: 232,
  f32x4Max: 233,
  f32x4Pmin: 234,
  f32x4Pmax: 235,
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
  f32(v: number) {
    const bytes = new Uint8Array(Float32Array.of(v).buffer)
    this.code.push(op.f32Const, ...bytes)
  }
  /** Pushes f32x4.splat(v). */
  splat(v: number) {
    this.f32(v)
    this.simd(simd.f32x4Splat)
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
 * Emits e^x for the f32x4 in local `x` into local `out` (Cephes expf: x = n·ln 2 + r, a degree-6
 * polynomial for e^r, 2^n built in the exponent bits; about 1 ulp). x is clamped to
 * [-87.336, 88], so e^x stays a normal float: below, the result is about 1.2e-38 rather than
 * smaller. Lanes are independent, so a scalar is computed by splatting it and taking lane 0.
 */
const emitExp = (f: Body, x: number, out: number, t: { fx: number; r: number }) => {
  // 1.5 · 2^23: adding it rounds a float below 2^22 to an integer (to nearest, ties to even),
  // held in the low mantissa bits.
  const MAGIC = 12582912
  // x = clamp(x) (pmax/pmin: one instruction each; a NaN x stays NaN)
  f.get(x)
  f.splat(-87.33654)
  f.simd(simd.f32x4Pmax)
  f.splat(88)
  f.simd(simd.f32x4Pmin)
  f.set(out)
  // t.r = x · log2 e + MAGIC, fx = t.r − MAGIC = nearest(x · log2 e)
  f.get(out)
  f.splat(Math.LOG2E)
  f.simd(simd.f32x4Mul)
  f.splat(MAGIC)
  f.simd(simd.f32x4Add)
  f.set(t.r)
  f.get(t.r)
  f.splat(MAGIC)
  f.simd(simd.f32x4Sub)
  f.set(t.fx)
  // 2^fx: the integer fx + 127 sits in the mantissa of t.r + 127; shifted into the exponent.
  f.get(t.r)
  f.splat(127)
  f.simd(simd.f32x4Add)
  f.i32(23)
  f.simd(simd.i32x4Shl)
  // r = x − fx · C1 − fx · C2
  f.get(out)
  f.get(t.fx)
  f.splat(0.693359375)
  f.simd(simd.f32x4Mul)
  f.simd(simd.f32x4Sub)
  f.get(t.fx)
  f.splat(-2.1219444e-4)
  f.simd(simd.f32x4Mul)
  f.simd(simd.f32x4Sub)
  f.set(t.r)
  // y = ((((p0·r + p1)·r + p2)·r + p3)·r + p4)·r + p5
  f.get(t.r)
  f.splat(1.98756915e-4)
  f.simd(simd.f32x4Mul)
  for (const c of [1.39819995e-3, 8.33345191e-3, 4.16657959e-2, 1.66666655e-1]) {
    f.splat(c)
    f.simd(simd.f32x4Add)
    f.get(t.r)
    f.simd(simd.f32x4Mul)
  }
  f.splat(5.00000012e-1)
  f.simd(simd.f32x4Add)
  // (y · r² + r + 1) · 2^fx (2^fx is already on the stack)
  f.get(t.r)
  f.get(t.r)
  f.simd(simd.f32x4Mul)
  f.simd(simd.f32x4Mul)
  f.get(t.r)
  f.simd(simd.f32x4Add)
  f.splat(1)
  f.simd(simd.f32x4Add)
  f.simd(simd.f32x4Mul)
  f.set(out)
}

/**
 * softmaxRows(ptr, rows, width, first, scale): each row i (width floats) keeps its first
 * min(first + i + 1, width) entries as softmax(scale · x) and zeroes the rest (a causal tile of
 * attention scores; one row with first = width − 1 is a plain softmax). Per row: the maximum,
 * e = exp(scale·x − scale·max) summed 4 lanes at a time from the row's start, then the lanes
 * ((0 + 1) + (2 + 3)) and the tail in order, then e · (1 / sum). The order is relative to the row,
 * so a row's result does not depend on where it lies.
 */
const softmaxBody = (): Body => {
  const [PTR, ROWS, WIDTH, FIRST, SCALE] = [0, 1, 2, 3, 4]
  const f = new Body(5)
  const i = f.local(I32)
  const j = f.local(I32)
  const row = f.local(I32)
  const valid = f.local(I32)
  const p = f.local(I32)
  const m = f.local(F32)
  const sum = f.local(F32)
  const inv = f.local(F32)
  const v = f.local(V128)
  const acc = f.local(V128)
  const e = f.local(V128)
  const vs = f.local(V128)
  const vm = f.local(V128)
  const t = { fx: f.local(V128), r: f.local(V128) }
  const lane = (local: number, l: number) => {
    f.get(local)
    f.simd(simd.f32x4ExtractLane, l)
  }
  /** p = row + j << 2 */
  const at = () => {
    f.get(j)
    f.i32(2)
    f.raw(op.i32Shl)
    f.get(row)
    f.raw(op.i32Add)
    f.set(p)
  }
  const vecFits = () => {
    f.get(j)
    f.i32(4)
    f.raw(op.i32Add)
    f.get(valid)
    f.raw(op.i32GtU, op.i32Eqz)
  }
  const scalarFits = (limit: number) => () => {
    f.get(j)
    f.get(limit)
    f.raw(op.i32LtU)
  }

  f.get(PTR)
  f.set(row)
  f.i32(0)
  f.set(i)
  f.whileLoop(
    () => {
      f.get(i)
      f.get(ROWS)
      f.raw(op.i32LtU)
    },
    () => {
      // valid = min(first + i + 1, width)
      f.get(FIRST)
      f.get(i)
      f.raw(op.i32Add)
      f.i32(1)
      f.raw(op.i32Add)
      f.set(valid)
      f.get(valid)
      f.get(WIDTH)
      f.raw(op.i32GtU)
      f.raw(0x04, 0x40) // if
      f.get(WIDTH)
      f.set(valid)
      f.raw(op.end)
      // maximum
      f.splat(Number.NEGATIVE_INFINITY)
      f.set(acc)
      f.i32(0)
      f.set(j)
      f.whileLoop(vecFits, () => {
        at()
        f.get(acc)
        f.get(p)
        f.simd(simd.v128Load, 2, 0)
        f.simd(simd.f32x4Max)
        f.set(acc)
        f.addTo(j, 4)
      })
      lane(acc, 0)
      lane(acc, 1)
      f.raw(op.f32Max)
      lane(acc, 2)
      lane(acc, 3)
      f.raw(op.f32Max)
      f.raw(op.f32Max)
      f.set(m)
      f.whileLoop(scalarFits(valid), () => {
        at()
        f.get(m)
        f.get(p)
        f.raw(op.f32Load, 2, 0)
        f.raw(op.f32Max)
        f.set(m)
        f.addTo(j, 1)
      })
      f.get(SCALE)
      f.simd(simd.f32x4Splat)
      f.set(vs)
      f.get(m)
      f.get(SCALE)
      f.raw(op.f32Mul)
      f.simd(simd.f32x4Splat)
      f.set(vm)
      // e = exp(scale·x − scale·max), summed
      f.splat(0)
      f.set(acc)
      f.i32(0)
      f.set(j)
      f.whileLoop(vecFits, () => {
        at()
        f.get(p)
        f.simd(simd.v128Load, 2, 0)
        f.get(vs)
        f.simd(simd.f32x4Mul)
        f.get(vm)
        f.simd(simd.f32x4Sub)
        f.set(v)
        emitExp(f, v, e, t)
        f.get(p)
        f.get(e)
        f.simd(simd.v128Store, 2, 0)
        f.get(acc)
        f.get(e)
        f.simd(simd.f32x4Add)
        f.set(acc)
        f.addTo(j, 4)
      })
      lane(acc, 0)
      lane(acc, 1)
      f.raw(op.f32Add)
      lane(acc, 2)
      lane(acc, 3)
      f.raw(op.f32Add)
      f.raw(op.f32Add)
      f.set(sum)
      f.whileLoop(scalarFits(valid), () => {
        at()
        f.get(p)
        f.raw(op.f32Load, 2, 0)
        f.simd(simd.f32x4Splat)
        f.get(vs)
        f.simd(simd.f32x4Mul)
        f.get(vm)
        f.simd(simd.f32x4Sub)
        f.set(v)
        emitExp(f, v, e, t)
        f.get(p)
        lane(e, 0)
        f.raw(op.f32Store, 2, 0)
        f.get(sum)
        lane(e, 0)
        f.raw(op.f32Add)
        f.set(sum)
        f.addTo(j, 1)
      })
      // · 1 / sum, zeros past the valid entries
      f.f32(1)
      f.get(sum)
      f.raw(op.f32Div)
      f.set(inv)
      f.get(inv)
      f.simd(simd.f32x4Splat)
      f.set(v)
      f.i32(0)
      f.set(j)
      f.whileLoop(vecFits, () => {
        at()
        f.get(p)
        f.get(p)
        f.simd(simd.v128Load, 2, 0)
        f.get(v)
        f.simd(simd.f32x4Mul)
        f.simd(simd.v128Store, 2, 0)
        f.addTo(j, 4)
      })
      f.whileLoop(scalarFits(valid), () => {
        at()
        f.get(p)
        f.get(p)
        f.raw(op.f32Load, 2, 0)
        f.get(inv)
        f.raw(op.f32Mul)
        f.raw(op.f32Store, 2, 0)
        f.addTo(j, 1)
      })
      f.whileLoop(scalarFits(WIDTH), () => {
        at()
        f.get(p)
        f.f32(0)
        f.raw(op.f32Store, 2, 0)
        f.addTo(j, 1)
      })
      // next row
      f.get(WIDTH)
      f.i32(2)
      f.raw(op.i32Shl)
      f.get(row)
      f.raw(op.i32Add)
      f.set(row)
      f.addTo(i, 1)
    },
  )
  return f
}

/** silu(h, act, sig, n): sig = 1 / (1 + exp(−h)), act = h · sig, for n floats. */
const siluBody = (): Body => {
  const [H, ACT, SIG, N] = [0, 1, 2, 3]
  const f = new Body(4)
  const j = f.local(I32)
  const off = f.local(I32)
  const hv = f.local(V128)
  const v = f.local(V128)
  const e = f.local(V128)
  const t = { fx: f.local(V128), r: f.local(V128) }
  /** off = j << 2 */
  const offset = () => {
    f.get(j)
    f.i32(2)
    f.raw(op.i32Shl)
    f.set(off)
  }
  const addr = (base: number) => {
    f.get(base)
    f.get(off)
    f.raw(op.i32Add)
  }
  /** From hv: sig into e, act into v. */
  const compute = () => {
    f.get(hv)
    f.simd(simd.f32x4Neg)
    f.set(v)
    emitExp(f, v, e, t)
    f.splat(1)
    f.splat(1)
    f.get(e)
    f.simd(simd.f32x4Add)
    f.simd(simd.f32x4Div)
    f.set(e)
    f.get(hv)
    f.get(e)
    f.simd(simd.f32x4Mul)
    f.set(v)
  }
  f.i32(0)
  f.set(j)
  f.whileLoop(
    () => {
      f.get(j)
      f.i32(4)
      f.raw(op.i32Add)
      f.get(N)
      f.raw(op.i32GtU, op.i32Eqz)
    },
    () => {
      offset()
      addr(H)
      f.simd(simd.v128Load, 2, 0)
      f.set(hv)
      compute()
      addr(SIG)
      f.get(e)
      f.simd(simd.v128Store, 2, 0)
      addr(ACT)
      f.get(v)
      f.simd(simd.v128Store, 2, 0)
      f.addTo(j, 4)
    },
  )
  f.whileLoop(
    () => {
      f.get(j)
      f.get(N)
      f.raw(op.i32LtU)
    },
    () => {
      offset()
      addr(H)
      f.raw(op.f32Load, 2, 0)
      f.simd(simd.f32x4Splat)
      f.set(hv)
      compute()
      addr(SIG)
      f.get(e)
      f.simd(simd.f32x4ExtractLane, 0)
      f.raw(op.f32Store, 2, 0)
      addr(ACT)
      f.get(v)
      f.simd(simd.f32x4ExtractLane, 0)
      f.raw(op.f32Store, 2, 0)
      f.addTo(j, 1)
    },
  )
  return f
}

/**
 * The module's bytes: imports `env.mem` (a memory of at least one page), exports `gemm`,
 * `transpose`, `softmaxRows` and `silu`.
 */
export const gemmModuleBytes = (): Uint8Array<ArrayBuffer> => {
  const fn = (params: number[]) => [0x60, ...uleb(params.length), ...params, 0]
  const i32s = (n: number) => new Array<number>(n).fill(I32)
  const importMemory = [...name("env"), ...name("mem"), 0x02, 0x00, ...uleb(1)]
  const functions: Array<[string, number[], Body]> = [
    ["gemm", fn(i32s(8)), gemmBody()],
    ["transpose", fn(i32s(4)), transposeBody()],
    ["softmaxRows", fn([...i32s(4), F32]), softmaxBody()],
    ["silu", fn(i32s(4)), siluBody()],
  ]
  return new Uint8Array([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(1, vec(functions.map(([, type]) => type))),
    ...section(2, vec([importMemory])),
    ...section(3, vec(functions.map((_, i) => uleb(i)))),
    ...section(7, vec(functions.map(([label], i) => [...name(label), 0x00, ...uleb(i)]))),
    ...section(10, vec(functions.map(([, , body]) => body.encode()))),
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
