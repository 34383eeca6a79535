import type { Floats } from "../kernels/kernels.ts"
import type { KvCache } from "./cache.ts"
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
  readonly q: Floats
  readonly attn: Floats
  readonly xMid: Floats
  readonly b: Floats
  readonly inv2: Floats
  readonly routerLogits: Floats
  readonly experts: Int32Array
  readonly gates: Float64Array
  /** Expert pre-activations and outputs per (row, slot), rows of width dFf and dModel. */
  readonly h1: Floats
  readonly y: Floats
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

/**
 * Pushes rows through the decoder, appending their keys and values to their caches. The same
 * function serves prefill (many rows of one cache), batched decode (one row per cache) and
 * training (all rows of a fresh cache, with a tape): a row's numbers depend only on its token,
 * its position and its cache, never on which rows it was batched with, which is what makes the
 * sampler's log-probs and the learner's agree.
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
  const F = c.dFf
  const H = c.nHeads
  const hd = d / H
  const scale = 1 / Math.sqrt(hd)
  const alloc = (n: number) => allocFloats(precision, n)

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

  let x = alloc(R * d)
  for (let r = 0; r < R; r++)
    x.set(p.embed.subarray((rows[r] as Row).token * d, ((rows[r] as Row).token + 1) * d), r * d)

  const routing = allocRouting(R, c.nLayers, K, E)
  const layers: LayerTape[] = []
  // Attention scores of one row span its position + 1 keys: sized to this call's longest row.
  const scores = new Float64Array(positions.reduce((m, p) => Math.max(m, p + 1), 0))
  const slot = new Int32Array(K)
  const gate = new Float64Array(K)

  for (let l = 0; l < c.nLayers; l++) {
    const lp = p.layers[l] as (typeof p.layers)[number]
    const xIn = x
    const a = alloc(R * d)
    const inv1 = alloc(R)
    kern.rmsNorm(xIn, lp.attnNorm, R, d, c.normEps, a, inv1)
    const q = alloc(R * d)
    const k = alloc(R * d)
    const v = alloc(R * d)
    kern.matmul(a, lp.wq, R, d, d, q)
    kern.matmul(a, lp.wk, R, d, d, k)
    kern.matmul(a, lp.wv, R, d, d, v)
    for (let r = 0; r < R; r++) {
      const pos = positions[r] as number
      model.rope.apply(q, r * d, H, pos, 1)
      model.rope.apply(k, r * d, H, pos, 1)
      const cache = (rows[r] as Row).cache
      ;(cache.keys[l] as Floats).set(k.subarray(r * d, (r + 1) * d), pos * d)
      ;(cache.values[l] as Floats).set(v.subarray(r * d, (r + 1) * d), pos * d)
    }
    const attn = alloc(R * d)
    for (let r = 0; r < R; r++) {
      const pos = positions[r] as number
      const cache = (rows[r] as Row).cache
      const keys = cache.keys[l] as Floats
      const values = cache.values[l] as Floats
      for (let h = 0; h < H; h++) {
        const qo = r * d + h * hd
        let max = Number.NEGATIVE_INFINITY
        for (let j = 0; j <= pos; j++) {
          const ko = j * d + h * hd
          let s = 0
          for (let i = 0; i < hd; i++) s += (q[qo + i] as number) * (keys[ko + i] as number)
          s *= scale
          scores[j] = s
          if (s > max) max = s
        }
        let sum = 0
        for (let j = 0; j <= pos; j++) {
          const e = Math.exp((scores[j] as number) - max)
          scores[j] = e
          sum += e
        }
        for (let i = 0; i < hd; i++) {
          let acc = 0
          for (let j = 0; j <= pos; j++)
            acc += (scores[j] as number) * (values[j * d + h * hd + i] as number)
          attn[qo + i] = acc / sum
        }
      }
    }
    const proj = alloc(R * d)
    kern.matmul(attn, lp.wo, R, d, d, proj)
    const xMid = alloc(R * d)
    for (let i = 0; i < R * d; i++) xMid[i] = (xIn[i] as number) + (proj[i] as number)

    const b = alloc(R * d)
    const inv2 = alloc(R)
    kern.rmsNorm(xMid, lp.ffnNorm, R, d, c.normEps, b, inv2)
    const routerLogits = alloc(R * E)
    kern.matmul(b, lp.router, R, d, E, routerLogits)
    const experts = new Int32Array(R * K)
    const gates = new Float64Array(R * K)
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

    const h1 = alloc(R * K * F)
    const y = alloc(R * K * d)
    const ffn = new Float64Array(R * d)
    for (let e = 0; e < E; e++) {
      const members: number[] = []
      for (let i = 0; i < R * K; i++) if (experts[i] === e) members.push(i)
      if (members.length === 0) continue
      const n = members.length
      const be = alloc(n * d)
      members.forEach((m, i) => {
        const r = Math.floor(m / K)
        be.set(b.subarray(r * d, (r + 1) * d), i * d)
      })
      const he = alloc(n * F)
      kern.matmul(be, lp.w1.subarray(e * d * F, (e + 1) * d * F), n, d, F, he)
      const act = alloc(n * F)
      for (let i = 0; i < n * F; i++) act[i] = silu(he[i] as number)
      const ye = alloc(n * d)
      kern.matmul(act, lp.w2.subarray(e * F * d, (e + 1) * F * d), n, F, d, ye)
      members.forEach((m, i) => {
        h1.set(he.subarray(i * F, (i + 1) * F), m * F)
        y.set(ye.subarray(i * d, (i + 1) * d), m * d)
        const r = Math.floor(m / K)
        const g = gates[m] as number
        for (let j = 0; j < d; j++)
          ffn[r * d + j] = (ffn[r * d + j] as number) + g * (ye[i * d + j] as number)
      })
    }
    const xOut = alloc(R * d)
    for (let i = 0; i < R * d; i++) xOut[i] = (xMid[i] as number) + (ffn[i] as number)
    if (options.tape)
      layers.push({ xIn, a, inv1, q, attn, xMid, b, inv2, routerLogits, experts, gates, h1, y })
    x = xOut
  }
  for (const [cache, count] of pending) cache.length += count

  const f = alloc(R * d)
  const invF = alloc(R)
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
  if (options.logits === "last") {
    logits = alloc(V)
    kern.matmul(f.subarray((R - 1) * d, R * d), p.lmHead, 1, d, V, logits)
  } else {
    logits = alloc(R * V)
    kern.matmul(f, p.lmHead, R, d, V, logits)
  }
  const tape = options.tape ? { rows, positions, layers, xFinal: x, f, invF } : undefined
  return tape ? { logits, values, routing, tape } : { logits, values, routing }
}
