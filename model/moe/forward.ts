import type { Floats, Kernels } from "../kernels/kernels.ts"
import { jsCausalSoftmax, jsSilu } from "../kernels/reference.ts"
import type { KvCache } from "./cache.ts"
import { headDim, kvHeads, kvWidth, layerFfn, queryWidth } from "./config.ts"
import { allocFloats } from "./params.ts"
import { allocRouting, type Routing, selectedGates, selectTopK } from "./routing.ts"
import type { ModelState } from "./state.ts"

/** One position to push through the model: a token appended to a sequence's cache. */
export interface Row {
  readonly cache: KvCache
  readonly token: number
}

export interface ForwardOptions {
  /**
   * R3: expert ids to use instead of the router's own top-k, [rows, layers, top_k]. Gate weights
   * are still recomputed from the current router logits, as a softmax over the replayed experts.
   */
  readonly replay?: Routing
  /** Keep the activations the backward pass needs. */
  readonly tape?: boolean
  /** Which rows get logits: all of them (training, scoring) or only the last row (prefill). */
  readonly logits?: "all" | "last"
}

/** Saved activations of one layer for the backward pass. */
export interface LayerTape {
  readonly xIn: Floats
  readonly a: Floats
  readonly inv1: Floats
  /** Query and key projections before their per-head RMSNorm, and its inverse RMS per head. */
  readonly qRaw: Floats
  readonly invQ: Floats
  readonly kRaw: Floats
  readonly invK: Floats
  /** Queries after norm and rotation, [rows, nHeads · headDim]. */
  readonly q: Floats
  readonly attn: Floats
  readonly xMid: Floats
  readonly b: Floats
  readonly inv2: Floats
  /** Whether the layer has experts; a dense layer's routerLogits are empty, its gates 1. */
  readonly moe: boolean
  readonly routerLogits: Floats
  readonly experts: Int32Array
  readonly gates: Float64Array
  /** Expert outputs per (row, slot), rows of width dModel. */
  readonly y: Floats
  /**
   * SiLU of the experts' gate projection, sigmoid of it, and the up projection: rows of width
   * dFf in expert order (the order of groupByExpert(experts)), so the backward pass reads each
   * expert's block as it lies and calls no exp.
   */
  readonly act1: Floats
  readonly sig1: Floats
  readonly up1: Floats
}

export interface Tape {
  readonly rows: ReadonlyArray<Row>
  readonly positions: Int32Array
  readonly layers: LayerTape[]
  readonly xFinal: Floats
  readonly f: Floats
  readonly invF: Floats
}

export interface ForwardResult {
  /** [rows, vocab], or [1, vocab] for `logits: "last"`. */
  readonly logits: Floats
  /** Critic estimate per row. */
  readonly values: Float64Array
  /** Experts used per row, [rows, layers, top_k] (recorded, or the replayed ids). */
  readonly routing: Routing
  readonly tape?: Tape
}

export const silu = (x: number): number => x / (1 + Math.exp(-x))

/** Query rows per attention tile: the causal part of a tile's scores is computed, not the rest. */
export const ATTENTION_TILE = 64
/** Runs of fewer rows than this (decode) take the plain loop rather than the tiled products. */
const MIN_TILED_ROWS = 4

/** rows[r0..r1) of `src` (row width `width`, columns [col, col + n)) into `dst` packed [r1 − r0, n]. */
export const gatherCols = (
  src: Floats,
  width: number,
  col: number,
  r0: number,
  r1: number,
  n: number,
  dst: Floats,
): void => {
  let o = 0
  for (let r = r0; r < r1; r++) {
    const from = r * width + col
    for (let i = 0; i < n; i++) dst[o++] = src[from + i] as number
  }
}

/** The inverse of gatherCols: packed rows of `src` into columns [col, col + n) of `dst`. */
export const scatterCols = (
  src: Floats,
  width: number,
  col: number,
  r0: number,
  r1: number,
  n: number,
  dst: Floats,
): void => {
  let o = 0
  for (let r = r0; r < r1; r++) {
    const to = r * width + col
    for (let i = 0; i < n; i++) dst[to + i] = src[o++] as number
  }
}

/** The kernels' causal softmax, or plain loops where they have none. */
export const softmaxOf = (kern: Kernels) => kern.causalSoftmax?.bind(kern) ?? jsCausalSoftmax

/** The kernels' SiLU, or plain loops where they have none. */
export const siluOf = (kern: Kernels) => kern.silu?.bind(kern) ?? jsSilu

/**
 * Scratch arrays of one precision, grown on demand: temporaries of a pass that never escape it,
 * kept per model (scratchFor) so that passes do not allocate and collect them again.
 */
export class Scratch {
  private readonly buffers = new Map<string, Floats>()

  constructor(private readonly alloc: (n: number) => Floats) {}

  /** At least n values, contents left over from earlier use. */
  get(name: string, n: number): Floats {
    let b = this.buffers.get(name)
    if (b === undefined || b.length < n) {
      b = this.alloc(Math.max(n, Math.ceil((b?.length ?? 0) * 1.5)))
      this.buffers.set(name, b)
    }
    return b
  }

  /** Exactly n values, contents left over. */
  view(name: string, n: number): Floats {
    return this.get(name, n).subarray(0, n)
  }

  /** Exactly n zeros. */
  zeros(name: string, n: number): Floats {
    const b = this.get(name, n).subarray(0, n)
    b.fill(0)
    return b
  }
}

const scratches = new WeakMap<ModelState, Scratch>()
/** The model's scratch arrays (one set per model object; a pass runs on one thread). */
export const scratchFor = (model: ModelState): Scratch => {
  let s = scratches.get(model)
  if (s === undefined) {
    const precision = model.precision
    s = new Scratch((n) => allocFloats(precision, n))
    scratches.set(model, s)
  }
  return s
}

/**
 * Rows of one cache at consecutive positions [first, first + n) attend to keys 0..position with
 * matrix products, a tile of ATTENTION_TILE queries at a time (keys beyond the tile's last
 * position are not computed). The cache already holds every key and value the rows see.
 */
const attendTiled = (
  model: ModelState,
  keys: Floats,
  values: Floats,
  q: Floats,
  r0: number,
  n: number,
  first: number,
  attn: Floats,
  scratch: Scratch,
): void => {
  const { config: c, kernels: kern } = model
  const H = c.nHeads
  const hd = headDim(c)
  const qW = queryWidth(c)
  const kvW = kvWidth(c)
  const group = H / kvHeads(c)
  const scale = 1 / Math.sqrt(hd)
  const L = first + n
  const Kh = scratch.get("attK", L * hd)
  const Vh = scratch.get("attV", L * hd)
  const Qh = scratch.get("attQ", n * hd)
  const tile = Math.min(ATTENTION_TILE, n)
  const S = scratch.get("attS", tile * L)
  const O = scratch.get("attO", tile * hd)
  const softmax = softmaxOf(kern)
  for (let h = 0; h < H; h++) {
    const g = (h / group) | 0
    if (h % group === 0) {
      gatherCols(keys, kvW, g * hd, 0, L, hd, Kh)
      gatherCols(values, kvW, g * hd, 0, L, hd, Vh)
    }
    gatherCols(q, qW, h * hd, r0, r0 + n, hd, Qh)
    for (let t0 = 0; t0 < n; t0 += tile) {
      const nt = Math.min(tile, n - t0)
      const Lt = first + t0 + nt
      kern.matmulTransB(Qh.subarray(t0 * hd), Kh, nt, hd, Lt, S)
      softmax(S, nt, Lt, first + t0, scale)
      kern.matmul(S, Vh, nt, Lt, hd, O)
      scatterCols(O, qW, h * hd, r0 + t0, r0 + t0 + nt, hd, attn)
    }
  }
}

/**
 * One row against its cache's keys 0..pos (decode), as two products over the cache's rows as
 * they lie ([pos + 1, kvW], every head at once): scores [heads, pos + 1] = Q · keysᵀ with Q the
 * [heads, kvW] matrix holding each query head in the columns of its key/value head (zeros
 * elsewhere), then [heads, kvW] = P · values, of which each head keeps its key/value head's
 * columns. The products do heads× the work a loop would, at SIMD
 * speed, without per-head gathers, and every score and output is summed in the same order as in
 * the tiled path (the block's zeros add exactly nothing), as is the softmax (same kernel, same
 * valid length): a decoded row equals the same row of a prefill bit for bit.
 */
const attendRow = (
  model: ModelState,
  keys: Floats,
  values: Floats,
  q: Floats,
  r: number,
  pos: number,
  attn: Floats,
  scratch: Scratch,
): void => {
  const { config: c, kernels: kern } = model
  const H = c.nHeads
  const hd = headDim(c)
  const qW = queryWidth(c)
  const kvW = kvWidth(c)
  const group = H / kvHeads(c)
  const scale = 1 / Math.sqrt(hd)
  const L = pos + 1
  const Q = scratch.get("decQ", H * kvW)
  Q.fill(0, 0, H * kvW)
  for (let h = 0; h < H; h++) {
    const o = h * kvW + ((h / group) | 0) * hd
    Q.set(q.subarray(r * qW + h * hd, r * qW + (h + 1) * hd), o)
  }
  const S = scratch.get("decS", H * L)
  kern.matmulTransB(Q, keys, H, kvW, L, S)
  softmaxOf(kern)(S, H, L, L - 1, scale)
  const O = scratch.get("decO", H * kvW)
  kern.matmul(S, values, H, L, kvW, O)
  for (let h = 0; h < H; h++) {
    const o = h * kvW + ((h / group) | 0) * hd
    attn.set(O.subarray(o, o + hd), r * qW + h * hd)
  }
}

/** (row, slot) pairs grouped by expert: members[start[e] .. start[e + 1]) use expert e. */
export const groupByExpert = (
  experts: Int32Array,
  count: number,
  nExperts: number,
): { start: Int32Array; members: Int32Array } => {
  const start = new Int32Array(nExperts + 1)
  for (let i = 0; i < count; i++) {
    const e = (experts[i] as number) + 1
    start[e] = (start[e] as number) + 1
  }
  for (let e = 0; e < nExperts; e++) start[e + 1] = (start[e + 1] as number) + (start[e] as number)
  const fill = start.slice(0, nExperts)
  const members = new Int32Array(count)
  for (let i = 0; i < count; i++) {
    const e = experts[i] as number
    members[fill[e] as number] = i
    fill[e] = (fill[e] as number) + 1
  }
  return { start, members }
}

/**
 * Pushes rows through the decoder, appending their keys and values to their caches. The same
 * function serves prefill (many rows of one cache), batched decode (one row per cache) and
 * training (all rows of a fresh cache, with a tape). A row's numbers depend only on its token,
 * its position and its cache, never on the rows batched with it: runs of at least 4 rows of one
 * cache take tiled attention products and single rows take block products over the cache, and
 * with the default kernels (simd: every output cell a sequential f32 sum) both compute each
 * score and output in the same order, so training, prefill (in any chunks) and decode give the
 * same logits bit for bit. With the reference kernels they agree to f32 rounding.
 */
export const forwardRows = (
  model: ModelState,
  rows: ReadonlyArray<Row>,
  options: ForwardOptions = {},
): ForwardResult => {
  const { config: c, params: p, kernels: kern, precision } = model
  const R = rows.length
  const d = c.dModel
  const E = c.nExperts
  const K = c.topK
  const H = c.nHeads
  const Hkv = kvHeads(c)
  const hd = headDim(c)
  const qW = queryWidth(c)
  const kvW = kvWidth(c)
  const alloc = (n: number) => allocFloats(precision, n)
  const scratch = scratchFor(model)
  // Activations a tape keeps are fresh arrays; without a tape they are the model's scratch
  // (allocating and faulting in ~1 MB per prefill was a tenth of a sampler's time). The final
  // logits and values, which the caller keeps, are always fresh.
  const buf = options.tape
    ? (_name: string, n: number) => alloc(n)
    : (name: string, n: number) => scratch.view(`fw.${name}`, n)
  const silu = siluOf(kern)

  if (options.replay && options.replay.length !== R * c.nLayers * K) {
    throw new RangeError(
      `replay routing has ${options.replay.length} entries; ${R} rows × ${c.nLayers} layers × top_k ${K} = ${R * c.nLayers * K}`,
    )
  }
  const positions = new Int32Array(R)
  const pending = new Map<KvCache, number>()
  for (let r = 0; r < R; r++) {
    const row = rows[r] as Row
    const offset = pending.get(row.cache) ?? 0
    const pos = row.cache.length + offset
    if (pos >= row.cache.capacity)
      throw new RangeError(`sequence exceeds the cache capacity of ${row.cache.capacity} positions`)
    if (!Number.isInteger(row.token) || row.token < 0 || row.token >= c.vocabSize) {
      throw new RangeError(`token id ${row.token} is outside the vocabulary of ${c.vocabSize}`)
    }
    positions[r] = pos
    pending.set(row.cache, offset + 1)
  }
  for (const [cache, count] of pending) cache.reserve(cache.length + count)
  // Runs of rows of one cache at consecutive positions: [runs[i], runs[i + 1]).
  const runs: number[] = [0]
  for (let r = 1; r < R; r++) {
    if (
      (rows[r] as Row).cache !== (rows[r - 1] as Row).cache ||
      positions[r] !== (positions[r - 1] as number) + 1
    )
      runs.push(r)
  }
  runs.push(R)

  let x = buf("x", R * d)
  for (let r = 0; r < R; r++)
    x.set(p.embed.subarray((rows[r] as Row).token * d, ((rows[r] as Row).token + 1) * d), r * d)

  const routing = allocRouting(R, c.nLayers, K, E)
  const layers: LayerTape[] = []
  const slot = new Int32Array(K)
  const gate = new Float64Array(K)

  for (let l = 0; l < c.nLayers; l++) {
    const lp = p.layers[l] as (typeof p.layers)[number]
    const xIn = x
    const a = buf("a", R * d)
    const inv1 = buf("inv1", R)
    kern.rmsNorm(xIn, lp.attnNorm, R, d, c.normEps, a, inv1)
    const qRaw = buf("qRaw", R * qW)
    const kRaw = buf("kRaw", R * kvW)
    // k and v live on in the caches, proj and ffn only until the residual adds: scratch.
    const v = scratch.view("v", R * kvW)
    kern.matmul(a, lp.wq, R, d, qW, qRaw)
    kern.matmul(a, lp.wk, R, d, kvW, kRaw)
    kern.matmul(a, lp.wv, R, d, kvW, v)
    // Qwen3's q_norm and k_norm: RMSNorm over each head's width, one gain shared by the heads.
    const q = buf("q", R * qW)
    const k = scratch.view("k", R * kvW)
    const invQ = buf("invQ", R * H)
    const invK = buf("invK", R * Hkv)
    kern.rmsNorm(qRaw, lp.qNorm, R * H, hd, c.normEps, q, invQ)
    kern.rmsNorm(kRaw, lp.kNorm, R * Hkv, hd, c.normEps, k, invK)
    for (let r = 0; r < R; r++) {
      const pos = positions[r] as number
      model.rope.apply(q, r * qW, H, pos, 1)
      model.rope.apply(k, r * kvW, Hkv, pos, 1)
      const cache = (rows[r] as Row).cache
      ;(cache.keys[l] as Floats).set(k.subarray(r * kvW, (r + 1) * kvW), pos * kvW)
      ;(cache.values[l] as Floats).set(v.subarray(r * kvW, (r + 1) * kvW), pos * kvW)
    }
    const attn = buf("attn", R * qW)
    for (let i = 0; i + 1 < runs.length; i++) {
      const r0 = runs[i] as number
      const r1 = runs[i + 1] as number
      const cache = (rows[r0] as Row).cache
      const keys = cache.keys[l] as Floats
      const values = cache.values[l] as Floats
      if (r1 - r0 >= MIN_TILED_ROWS) {
        attendTiled(model, keys, values, q, r0, r1 - r0, positions[r0] as number, attn, scratch)
      } else {
        for (let r = r0; r < r1; r++)
          attendRow(model, keys, values, q, r, positions[r] as number, attn, scratch)
      }
    }
    const proj = scratch.view("proj", R * d)
    kern.matmul(attn, lp.wo, R, qW, d, proj)
    const xMid = buf("xMid", R * d)
    for (let i = 0; i < R * d; i++) xMid[i] = (xIn[i] as number) + (proj[i] as number)

    const b = buf("b", R * d)
    const inv2 = buf("inv2", R)
    kern.rmsNorm(xMid, lp.ffnNorm, R, d, c.normEps, b, inv2)
    // A dense layer is one expert every row uses with gate 1; its routing entries stay 0.
    const mlp = layerFfn(c, l)
    const El = mlp.experts
    const Kl = mlp.topK
    const Fl = mlp.width
    const routerLogits = buf("router", R * (mlp.moe ? E : 0))
    const experts = new Int32Array(R * Kl)
    const gates = new Float64Array(R * Kl)
    if (mlp.moe) {
      kern.matmul(b, lp.router, R, d, E, routerLogits)
      for (let r = 0; r < R; r++) {
        if (options.replay) {
          for (let s = 0; s < K; s++) {
            const e = options.replay[(r * c.nLayers + l) * K + s] as number
            if (e >= E)
              throw new RangeError(
                `replayed expert ${e} at row ${r}, layer ${l} does not exist (${E} experts)`,
              )
            slot[s] = e
          }
        } else selectTopK(routerLogits, r * E, E, K, slot)
        selectedGates(routerLogits, r * E, slot, K, gate)
        for (let s = 0; s < K; s++) {
          experts[r * K + s] = slot[s] as number
          gates[r * K + s] = gate[s] as number
          routing[(r * c.nLayers + l) * K + s] = slot[s] as number
        }
      }
    } else gates.fill(1)

    const act1 = buf("act1", R * Kl * Fl)
    const sig1 = buf("sig1", R * Kl * Fl)
    const up1 = buf("up1", R * Kl * Fl)
    const y = buf("y", R * Kl * d)
    const ffn = scratch.zeros("ffn", R * d)
    const { start, members } = groupByExpert(experts, R * Kl, El)
    for (let e = 0; e < El; e++) {
      const m0 = start[e] as number
      const n = (start[e + 1] as number) - m0
      if (n === 0) continue
      const be = scratch.get("be", n * d)
      for (let i = 0; i < n; i++) {
        const r = ((members[m0 + i] as number) / Kl) | 0
        be.set(b.subarray(r * d, (r + 1) * d), i * d)
      }
      const he = scratch.get("he", n * Fl)
      kern.matmul(be, lp.wGate.subarray(e * d * Fl, (e + 1) * d * Fl), n, d, Fl, he)
      const act = act1.subarray(m0 * Fl, (m0 + n) * Fl)
      silu(he, n * Fl, act, sig1.subarray(m0 * Fl, (m0 + n) * Fl))
      const up = up1.subarray(m0 * Fl, (m0 + n) * Fl)
      kern.matmul(be, lp.wUp.subarray(e * d * Fl, (e + 1) * d * Fl), n, d, Fl, up)
      const hidden = scratch.get("hidden", n * Fl)
      for (let i = 0; i < n * Fl; i++) hidden[i] = (act[i] as number) * (up[i] as number)
      const ye = scratch.get("ye", n * d)
      kern.matmul(hidden, lp.wDown.subarray(e * Fl * d, (e + 1) * Fl * d), n, Fl, d, ye)
      for (let i = 0; i < n; i++) {
        const m = members[m0 + i] as number
        const r = (m / Kl) | 0
        y.set(ye.subarray(i * d, (i + 1) * d), m * d)
        const g = gates[m] as number
        for (let j = 0; j < d; j++)
          ffn[r * d + j] = (ffn[r * d + j] as number) + g * (ye[i * d + j] as number)
      }
    }
    const xOut = buf(`xOut${l % 2}`, R * d)
    for (let i = 0; i < R * d; i++) xOut[i] = (xMid[i] as number) + (ffn[i] as number)
    if (options.tape)
      layers.push({
        xIn,
        a,
        inv1,
        qRaw,
        invQ,
        kRaw,
        invK,
        q,
        attn,
        xMid,
        b,
        inv2,
        moe: mlp.moe,
        routerLogits,
        experts,
        gates,
        y,
        act1,
        sig1,
        up1,
      })
    x = xOut
  }
  for (const [cache, count] of pending) cache.length += count

  const f = buf("f", R * d)
  const invF = buf("invF", R)
  kern.rmsNorm(x, p.finalNorm, R, d, c.normEps, f, invF)
  const values = new Float64Array(R)
  const bias = p.valueBias[0] as number
  for (let r = 0; r < R; r++) {
    let s = bias
    for (let j = 0; j < d; j++) s += (f[r * d + j] as number) * (p.valueHead[j] as number)
    values[r] = s
  }
  const V = c.vocabSize
  let logits: Floats
  const head = (rows: Floats, n: number, out: Floats) =>
    c.tieWordEmbeddings
      ? kern.matmulTransB(rows, p.embed, n, d, V, out)
      : kern.matmul(rows, p.lmHead, n, d, V, out)
  if (options.logits === "last") {
    logits = alloc(V)
    head(f.subarray((R - 1) * d, R * d), 1, logits)
  } else {
    logits = alloc(R * V)
    head(f, R, logits)
  }
  const tape = options.tape ? { rows, positions, layers, xFinal: x, f, invF } : undefined
  return tape ? { logits, values, routing, tape } : { logits, values, routing }
}
