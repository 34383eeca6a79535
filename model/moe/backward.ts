import type { Floats } from "../kernels/kernels.ts"
import { addLoadBalancingGrad } from "./aux.ts"
import { headDim, kvHeads, kvWidth, layerFfn, queryWidth } from "./config.ts"
import {
  ATTENTION_TILE,
  gatherCols,
  groupByExpert,
  type Scratch,
  scatterCols,
  scratchFor,
  softmaxOf,
  type Tape,
} from "./forward.ts"
import { type Params, zerosLike } from "./params.ts"
import type { ModelState } from "./state.ts"

export interface BackwardOptions {
  /** Weight of the load-balancing loss summed over layers; 0 leaves the router to the task loss. */
  readonly auxLossCoef?: number
  /**
   * Whether the value loss reaches the trunk (default true: a critic sharing the policy's trunk).
   * False trains the value head alone, as a probe on the trunk's features.
   */
  readonly valueToTrunk?: boolean
}

const addInto = (dst: Floats, src: Floats): void => {
  for (let i = 0; i < src.length; i++) dst[i] = (dst[i] as number) + (src[i] as number)
}

/** dx += RMSNorm backward of dy; dGain += Σ_rows dy ⊙ x ⊙ inv. */
const rmsNormBackward = (
  dy: Floats,
  x: Floats,
  inv: Floats,
  gain: Floats,
  rows: number,
  d: number,
  dx: Floats,
  dGain: Floats,
): void => {
  for (let r = 0; r < rows; r++) {
    const o = r * d
    const iv = inv[r] as number
    let dot = 0
    for (let j = 0; j < d; j++) {
      const g = dy[o + j] as number
      dot += g * (gain[j] as number) * (x[o + j] as number)
      dGain[j] = (dGain[j] as number) + g * (x[o + j] as number) * iv
    }
    const c = (iv * iv * iv * dot) / d
    for (let j = 0; j < d; j++) {
      dx[o + j] =
        (dx[o + j] as number) +
        iv * (gain[j] as number) * (dy[o + j] as number) -
        c * (x[o + j] as number)
    }
  }
}

/**
 * Gradients of every parameter, given the gradients of some loss with respect to the logits and
 * the values of a taped forward pass over one sequence from position 0. Routing is whatever the
 * forward pass used (recomputed or replayed): the top-k choice itself has no gradient, the gate
 * weights (a softmax over the chosen experts' router logits) carry it to the router.
 *
 * Only rows of dLogits with a non-zero entry reach the LM head's products (an RL sequence trains
 * on its generated tokens, not on its prompt and observations), and attention is recomputed a
 * tile of queries at a time with matrix products, as in the forward pass.
 */
export const backward = (
  model: ModelState,
  tape: Tape,
  dLogits: Floats,
  dValues: Float64Array | undefined,
  options: BackwardOptions = {},
): Params => {
  const { config: c, params: p, kernels: kern, precision } = model
  const R = tape.rows.length
  const d = c.dModel
  const E = c.nExperts
  const K = c.topK
  const H = c.nHeads
  const Hkv = kvHeads(c)
  const V = c.vocabSize
  const hd = headDim(c)
  const qW = queryWidth(c)
  const kvW = kvWidth(c)
  const scale = 1 / Math.sqrt(hd)
  const scratch = scratchFor(model)
  const cache = tape.rows[0]?.cache
  if (!cache || tape.rows.some((row, r) => row.cache !== cache || tape.positions[r] !== r)) {
    throw new RangeError(
      "backward needs a taped forward pass over one sequence starting at position 0",
    )
  }
  if (dLogits.length !== R * V)
    throw new RangeError(`dLogits has ${dLogits.length} entries, expected ${R}×${V}`)
  const g = zerosLike(c, precision)

  // Heads: logits and values both read the final normalised state f.
  const df = scratch.zeros("df", R * d)
  const used: number[] = []
  for (let r = 0; r < R; r++) {
    for (let j = r * V; j < (r + 1) * V; j++) {
      if (dLogits[j] !== 0) {
        used.push(r)
        break
      }
    }
  }
  const nU = used.length
  if (nU > 0) {
    // The rows with a gradient, packed (and in the model's precision, so the products see one
    // array type).
    const dL = scratch.view("dL", nU * V)
    const fU = scratch.view("fU", nU * d)
    used.forEach((r, i) => {
      dL.set(dLogits.subarray(r * V, (r + 1) * V), i * V)
      fU.set(tape.f.subarray(r * d, (r + 1) * d), i * d)
    })
    const dfU = scratch.view("dfU", nU * d)
    if (c.tieWordEmbeddings) {
      // logits = f · embedᵀ: the embedding's gradient gets dLᵀ · f here, the tokens' rows below.
      kern.matmul(dL, p.embed, nU, V, d, dfU)
      const dE = scratch.view("dEmbedHead", V * d)
      kern.matmulTransA(dL, fU, V, nU, d, dE)
      addInto(g.embed, dE)
    } else {
      kern.matmulTransB(dL, p.lmHead, nU, V, d, dfU)
      kern.matmulTransA(fU, dL, d, nU, V, g.lmHead)
    }
    used.forEach((r, i) => {
      df.set(dfU.subarray(i * d, (i + 1) * d), r * d)
    })
  }
  if (dValues) {
    const toTrunk = options.valueToTrunk !== false
    for (let r = 0; r < R; r++) {
      const dv = dValues[r] as number
      if (dv === 0) continue
      g.valueBias[0] = (g.valueBias[0] as number) + dv
      for (let j = 0; j < d; j++) {
        g.valueHead[j] = (g.valueHead[j] as number) + dv * (tape.f[r * d + j] as number)
        if (toTrunk) df[r * d + j] = (df[r * d + j] as number) + dv * (p.valueHead[j] as number)
      }
    }
  }
  let dx = scratch.zeros("dx", R * d)
  rmsNormBackward(df, tape.xFinal, tape.invF, p.finalNorm, R, d, dx, g.finalNorm)

  for (let l = c.nLayers - 1; l >= 0; l--) {
    const t = tape.layers[l] as Tape["layers"][number]
    const lp = p.layers[l] as Params["layers"][number]
    const gl = g.layers[l] as Params["layers"][number]

    // Mixture of experts: out = xMid + Σ_s gate_s · down(silu(b · gate) ⊙ (b · up)).
    // A dense layer is one expert of gate 1 (forward.ts): the same algebra, no router.
    const mlp = layerFfn(c, l)
    const El = mlp.experts
    const Kl = mlp.topK
    const Fl = mlp.width
    const db = scratch.zeros("db", R * d)
    const dGate = new Float64Array(R * Kl)
    const { start, members } = groupByExpert(t.experts, R * Kl, El)
    for (let e = 0; e < El; e++) {
      const m0 = start[e] as number
      const n = (start[e + 1] as number) - m0
      if (n === 0) continue
      const be = scratch.get("be", n * d)
      const act = t.act1.subarray(m0 * Fl, (m0 + n) * Fl)
      const sig = t.sig1.subarray(m0 * Fl, (m0 + n) * Fl)
      const up = t.up1.subarray(m0 * Fl, (m0 + n) * Fl)
      const dYe = scratch.get("dYe", n * d)
      for (let i = 0; i < n; i++) {
        const m = members[m0 + i] as number
        const r = (m / Kl) | 0
        be.set(t.b.subarray(r * d, (r + 1) * d), i * d)
        const gate = t.gates[m] as number
        let dg = 0
        for (let j = 0; j < d; j++) {
          const up = dx[r * d + j] as number
          dYe[i * d + j] = gate * up
          dg += up * (t.y[m * d + j] as number)
        }
        dGate[m] = dg
      }
      const gateE = lp.wGate.subarray(e * d * Fl, (e + 1) * d * Fl)
      const upE = lp.wUp.subarray(e * d * Fl, (e + 1) * d * Fl)
      const downE = lp.wDown.subarray(e * Fl * d, (e + 1) * Fl * d)
      const hidden = scratch.get("hidden", n * Fl)
      for (let i = 0; i < n * Fl; i++) hidden[i] = (act[i] as number) * (up[i] as number)
      const dHidden = scratch.get("dHidden", n * Fl)
      kern.matmulTransB(dYe, downE, n, d, Fl, dHidden)
      kern.matmulTransA(hidden, dYe, Fl, n, d, gl.wDown.subarray(e * Fl * d, (e + 1) * Fl * d))
      // hidden = silu(g) ⊙ u: dU = dHidden ⊙ silu(g), dG = dHidden ⊙ u ⊙ silu'(g), with
      // silu'(g) = s · (1 + g · (1 − s)) = s + silu(g) · (1 − s).
      const dU = scratch.get("dU", n * Fl)
      const dG = scratch.get("dG", n * Fl)
      for (let i = 0; i < n * Fl; i++) {
        const sv = sig[i] as number
        const dh = dHidden[i] as number
        dU[i] = dh * (act[i] as number)
        dG[i] = dh * (up[i] as number) * (sv + (act[i] as number) * (1 - sv))
      }
      kern.matmulTransA(be, dG, d, n, Fl, gl.wGate.subarray(e * d * Fl, (e + 1) * d * Fl))
      kern.matmulTransA(be, dU, d, n, Fl, gl.wUp.subarray(e * d * Fl, (e + 1) * d * Fl))
      const dBe = scratch.get("dBe", n * d)
      kern.matmulTransB(dG, gateE, n, Fl, d, dBe)
      const dBeUp = scratch.get("dBeUp", n * d)
      kern.matmulTransB(dU, upE, n, Fl, d, dBeUp)
      for (let i = 0; i < n * d; i++) dBe[i] = (dBe[i] as number) + (dBeUp[i] as number)
      for (let i = 0; i < n; i++) {
        const r = ((members[m0 + i] as number) / Kl) | 0
        for (let j = 0; j < d; j++)
          db[r * d + j] = (db[r * d + j] as number) + (dBe[i * d + j] as number)
      }
    }
    // Gates are a softmax over the chosen experts' logits.
    if (mlp.moe) {
      const dRouterLogits = scratch.zeros("dRouterLogits", R * E)
      for (let r = 0; r < R; r++) {
        let dot = 0
        for (let s = 0; s < K; s++)
          dot += (t.gates[r * K + s] as number) * (dGate[r * K + s] as number)
        for (let s = 0; s < K; s++) {
          const i = r * E + (t.experts[r * K + s] as number)
          const gate = t.gates[r * K + s] as number
          dRouterLogits[i] =
            (dRouterLogits[i] as number) + gate * ((dGate[r * K + s] as number) - dot)
        }
      }
      if (options.auxLossCoef)
        addLoadBalancingGrad(t.routerLogits, t.experts, R, E, K, options.auxLossCoef, dRouterLogits)
      kern.matmulTransA(t.b, dRouterLogits, d, R, E, gl.router)
      const dbRouter = scratch.view("dbRouter", R * d)
      kern.matmulTransB(dRouterLogits, lp.router, R, E, d, dbRouter)
      addInto(db, dbRouter)
    }
    const dxMid = dx
    rmsNormBackward(db, t.xMid, t.inv2, lp.ffnNorm, R, d, dxMid, gl.ffnNorm)

    // Attention: xMid = xIn + attn · wo.
    kern.matmulTransA(t.attn, dxMid, qW, R, d, gl.wo)
    const dAttn = scratch.view("dAttn", R * qW)
    kern.matmulTransB(dxMid, lp.wo, R, d, qW, dAttn)
    const dq = scratch.view("dq", R * qW)
    const dk = scratch.view("dk", R * kvW)
    const dv = scratch.view("dv", R * kvW)
    attentionBackward(
      model,
      t.q,
      cache.keys[l] as Floats,
      cache.values[l] as Floats,
      dAttn,
      R,
      scale,
      dq,
      dk,
      dv,
      scratch,
    )
    // Gradients reach the normed queries and keys through the inverse rotation, then the
    // projections through the per-head norms.
    for (let r = 0; r < R; r++) {
      model.rope.apply(dq, r * qW, H, r, -1)
      model.rope.apply(dk, r * kvW, Hkv, r, -1)
    }
    const dqRaw = scratch.zeros("dqRaw", R * qW)
    const dkRaw = scratch.zeros("dkRaw", R * kvW)
    rmsNormBackward(dq, t.qRaw, t.invQ, lp.qNorm, R * H, hd, dqRaw, gl.qNorm)
    rmsNormBackward(dk, t.kRaw, t.invK, lp.kNorm, R * Hkv, hd, dkRaw, gl.kNorm)
    const da = scratch.zeros("da", R * d)
    const tmp = scratch.view("tmpRd", R * d)
    for (const [grad, w, gw, width] of [
      [dqRaw, lp.wq, gl.wq, qW],
      [dkRaw, lp.wk, gl.wk, kvW],
      [dv, lp.wv, gl.wv, kvW],
    ] as const) {
      kern.matmulTransA(t.a, grad, d, R, width, gw)
      kern.matmulTransB(grad, w, R, width, d, tmp)
      addInto(da, tmp)
    }
    const dxIn = dxMid
    rmsNormBackward(da, t.xIn, t.inv1, lp.attnNorm, R, d, dxIn, gl.attnNorm)
    dx = dxIn
  }
  for (let r = 0; r < R; r++) {
    const token = (tape.rows[r] as Tape["rows"][number]).token
    for (let j = 0; j < d; j++)
      g.embed[token * d + j] = (g.embed[token * d + j] as number) + (dx[r * d + j] as number)
  }
  return g
}

/**
 * Causal self-attention of one sequence (R rows from position 0) backward: dq [R, qW], dk and
 * dv [R, kvW] (post-rotation) from dAttn. Per head and tile of queries, the probabilities are
 * recomputed as in the forward pass, then
 *   dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(P ⊙ dP)) · scale, dQ = dS·K, dK += dSᵀ·Q, dV += Pᵀ·dO.
 */
const attentionBackward = (
  model: ModelState,
  q: Floats,
  keys: Floats,
  values: Floats,
  dAttn: Floats,
  R: number,
  scale: number,
  dq: Floats,
  dk: Floats,
  dv: Floats,
  scratch: Scratch,
): void => {
  const { config: c, kernels: kern } = model
  const H = c.nHeads
  const hd = headDim(c)
  const qW = queryWidth(c)
  const kvW = kvWidth(c)
  const group = H / kvHeads(c)
  const tile = Math.min(ATTENTION_TILE, R)
  const Qh = scratch.get("Qh", R * hd)
  const Kh = scratch.get("Kh", R * hd)
  const Vh = scratch.get("Vh", R * hd)
  const dOh = scratch.get("dOh", R * hd)
  const dQh = scratch.get("dQh", R * hd)
  const dKh = scratch.get("dKh", R * hd)
  const dVh = scratch.get("dVh", R * hd)
  const P = scratch.get("P", tile * R)
  const dS = scratch.get("dS", tile * R)
  const tmp = scratch.get("tmp", R * hd)
  const softmax = softmaxOf(kern)
  for (let h = 0; h < H; h++) {
    // The query heads of one key/value head come one after another: its gradients sum over them.
    const g = (h / group) | 0
    const firstOfGroup = h % group === 0
    gatherCols(q, qW, h * hd, 0, R, hd, Qh)
    if (firstOfGroup) {
      gatherCols(keys, kvW, g * hd, 0, R, hd, Kh)
      gatherCols(values, kvW, g * hd, 0, R, hd, Vh)
      dKh.fill(0, 0, R * hd)
      dVh.fill(0, 0, R * hd)
    }
    gatherCols(dAttn, qW, h * hd, 0, R, hd, dOh)
    for (let t0 = 0; t0 < R; t0 += tile) {
      const nt = Math.min(tile, R - t0)
      const Lt = t0 + nt
      const Qt = Qh.subarray(t0 * hd)
      const dOt = dOh.subarray(t0 * hd)
      kern.matmulTransB(Qt, Kh, nt, hd, Lt, P)
      softmax(P, nt, Lt, t0, scale)
      kern.matmulTransB(dOt, Vh, nt, hd, Lt, dS)
      for (let i = 0; i < nt; i++) {
        const o = i * Lt
        const last = t0 + i
        let dot = 0
        for (let j = 0; j <= last; j++) dot += (P[o + j] as number) * (dS[o + j] as number)
        for (let j = 0; j <= last; j++)
          dS[o + j] = (P[o + j] as number) * ((dS[o + j] as number) - dot) * scale
        for (let j = last + 1; j < Lt; j++) dS[o + j] = 0
      }
      kern.matmul(dS, Kh, nt, Lt, hd, dQh.subarray(t0 * hd))
      kern.matmulTransA(dS, Qt, Lt, nt, hd, tmp)
      addInto(dKh.subarray(0, Lt * hd), tmp.subarray(0, Lt * hd))
      kern.matmulTransA(P, dOt, Lt, nt, hd, tmp)
      addInto(dVh.subarray(0, Lt * hd), tmp.subarray(0, Lt * hd))
    }
    scatterCols(dQh, qW, h * hd, 0, R, hd, dq)
    if ((h + 1) % group === 0) {
      scatterCols(dKh, kvW, g * hd, 0, R, hd, dk)
      scatterCols(dVh, kvW, g * hd, 0, R, hd, dv)
    }
  }
}
