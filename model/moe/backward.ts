import type { Floats } from "../kernels/kernels.ts"
import { addLoadBalancingGrad } from "./aux.ts"
import type { Tape } from "./forward.ts"
import { allocFloats, type Params, zerosLike } from "./params.ts"
import type { ModelState } from "./state.ts"

export interface BackwardOptions {
  /** Weight of the load-balancing loss summed over layers; 0 leaves the router to the task loss. */
  readonly auxLossCoef?: number
}

const addInto = (dst: Floats, src: Floats): void => {
  for (let i = 0; i < src.length; i++) dst[i] = (dst[i] as number) + (src[i] as number)
}

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x))

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
  const F = c.dFf
  const H = c.nHeads
  const V = c.vocabSize
  const hd = d / H
  const scale = 1 / Math.sqrt(hd)
  const alloc = (n: number) => allocFloats(precision, n)
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
  const df = alloc(R * d)
  kern.matmulTransB(dLogits, p.lmHead, R, V, d, df)
  const tmpHead = alloc(d * V)
  kern.matmulTransA(tape.f, dLogits, d, R, V, tmpHead)
  addInto(g.lmHead, tmpHead)
  if (dValues) {
    for (let r = 0; r < R; r++) {
      const dv = dValues[r] as number
      if (dv === 0) continue
      g.valueBias[0] = (g.valueBias[0] as number) + dv
      for (let j = 0; j < d; j++) {
        g.valueHead[j] = (g.valueHead[j] as number) + dv * (tape.f[r * d + j] as number)
        df[r * d + j] = (df[r * d + j] as number) + dv * (p.valueHead[j] as number)
      }
    }
  }
  let dx = alloc(R * d)
  rmsNormBackward(df, tape.xFinal, tape.invF, p.finalNorm, R, d, dx, g.finalNorm)

  for (let l = c.nLayers - 1; l >= 0; l--) {
    const t = tape.layers[l] as Tape["layers"][number]
    const lp = p.layers[l] as Params["layers"][number]
    const gl = g.layers[l] as Params["layers"][number]

    // Mixture of experts: out = xMid + Σ_s gate_s · expert_s(b).
    const db = alloc(R * d)
    const dGate = new Float64Array(R * K)
    for (let e = 0; e < E; e++) {
      const members: number[] = []
      for (let i = 0; i < R * K; i++) if (t.experts[i] === e) members.push(i)
      if (members.length === 0) continue
      const n = members.length
      const be = alloc(n * d)
      const act = alloc(n * F)
      const dYe = alloc(n * d)
      members.forEach((m, i) => {
        const r = Math.floor(m / K)
        be.set(t.b.subarray(r * d, (r + 1) * d), i * d)
        for (let j = 0; j < F; j++) {
          const h = t.h1[m * F + j] as number
          act[i * F + j] = h * sigmoid(h)
        }
        const gate = t.gates[m] as number
        let dg = 0
        for (let j = 0; j < d; j++) {
          const up = dx[r * d + j] as number
          dYe[i * d + j] = gate * up
          dg += up * (t.y[m * d + j] as number)
        }
        dGate[m] = dg
      })
      const w1e = lp.w1.subarray(e * d * F, (e + 1) * d * F)
      const w2e = lp.w2.subarray(e * F * d, (e + 1) * F * d)
      const dAct = alloc(n * F)
      kern.matmulTransB(dYe, w2e, n, d, F, dAct)
      const dW2 = alloc(F * d)
      kern.matmulTransA(act, dYe, F, n, d, dW2)
      addInto(gl.w2.subarray(e * F * d, (e + 1) * F * d), dW2)
      const dH = alloc(n * F)
      members.forEach((m, i) => {
        for (let j = 0; j < F; j++) {
          const h = t.h1[m * F + j] as number
          const s = sigmoid(h)
          dH[i * F + j] = (dAct[i * F + j] as number) * s * (1 + h * (1 - s))
        }
      })
      const dW1 = alloc(d * F)
      kern.matmulTransA(be, dH, d, n, F, dW1)
      addInto(gl.w1.subarray(e * d * F, (e + 1) * d * F), dW1)
      const dBe = alloc(n * d)
      kern.matmulTransB(dH, w1e, n, F, d, dBe)
      members.forEach((m, i) => {
        const r = Math.floor(m / K)
        for (let j = 0; j < d; j++)
          db[r * d + j] = (db[r * d + j] as number) + (dBe[i * d + j] as number)
      })
    }
    // Gates are a softmax over the chosen experts' logits.
    const dRouterLogits = alloc(R * E)
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
    const dRouter = alloc(d * E)
    kern.matmulTransA(t.b, dRouterLogits, d, R, E, dRouter)
    addInto(gl.router, dRouter)
    const dbRouter = alloc(R * d)
    kern.matmulTransB(dRouterLogits, lp.router, R, E, d, dbRouter)
    addInto(db, dbRouter)
    const dxMid = dx
    rmsNormBackward(db, t.xMid, t.inv2, lp.ffnNorm, R, d, dxMid, gl.ffnNorm)

    // Attention: xMid = xIn + attn · wo.
    const dWo = alloc(d * d)
    kern.matmulTransA(t.attn, dxMid, d, R, d, dWo)
    addInto(gl.wo, dWo)
    const dAttn = alloc(R * d)
    kern.matmulTransB(dxMid, lp.wo, R, d, d, dAttn)
    const keys = cache.keys[l] as Floats
    const values = cache.values[l] as Floats
    const dq = alloc(R * d)
    const dk = new Float64Array(R * d)
    const dv = new Float64Array(R * d)
    const probs = new Float64Array(R)
    const dpj = new Float64Array(R)
    for (let r = 0; r < R; r++) {
      for (let h = 0; h < H; h++) {
        const qo = r * d + h * hd
        let max = Number.NEGATIVE_INFINITY
        for (let j = 0; j <= r; j++) {
          let s = 0
          for (let i = 0; i < hd; i++)
            s += (t.q[qo + i] as number) * (keys[j * d + h * hd + i] as number)
          s *= scale
          probs[j] = s
          if (s > max) max = s
        }
        let sum = 0
        for (let j = 0; j <= r; j++) {
          const e = Math.exp((probs[j] as number) - max)
          probs[j] = e
          sum += e
        }
        let pdp = 0
        for (let j = 0; j <= r; j++) {
          const pj = (probs[j] as number) / sum
          probs[j] = pj
          let s = 0
          for (let i = 0; i < hd; i++)
            s += (dAttn[qo + i] as number) * (values[j * d + h * hd + i] as number)
          dpj[j] = s
          pdp += pj * s
        }
        for (let j = 0; j <= r; j++) {
          const pj = probs[j] as number
          const ds = pj * ((dpj[j] as number) - pdp) * scale
          const ko = j * d + h * hd
          for (let i = 0; i < hd; i++) {
            dq[qo + i] = (dq[qo + i] as number) + ds * (keys[ko + i] as number)
            dk[ko + i] = (dk[ko + i] as number) + ds * (t.q[qo + i] as number)
            dv[ko + i] = (dv[ko + i] as number) + pj * (dAttn[qo + i] as number)
          }
        }
      }
    }
    // Gradients reach the pre-rotation projections through the inverse rotation.
    const dkp = alloc(R * d)
    const dvp = alloc(R * d)
    dkp.set(dk)
    dvp.set(dv)
    for (let r = 0; r < R; r++) {
      model.rope.apply(dq, r * d, H, r, -1)
      model.rope.apply(dkp, r * d, H, r, -1)
    }
    const da = alloc(R * d)
    const tmp = alloc(R * d)
    const dW = alloc(d * d)
    for (const [grad, w, gw] of [
      [dq, lp.wq, gl.wq],
      [dkp, lp.wk, gl.wk],
      [dvp, lp.wv, gl.wv],
    ] as const) {
      kern.matmulTransA(t.a, grad, d, R, d, dW)
      addInto(gw, dW)
      kern.matmulTransB(grad, w, R, d, d, tmp)
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
