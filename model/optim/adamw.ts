import type { Tensor } from "../weights/dtypes.ts"
import { decodeSafetensors, encodeSafetensors } from "../weights/safetensors.ts"
import { OptimizerError } from "./errors.ts"

export type Floats = Float32Array | Float64Array

export interface AdamWOptions {
  /** Learning rate when `step` is not given one. */
  readonly lr: number
  /** First-moment decay (default 0.9). */
  readonly beta1?: number
  /** Second-moment decay (default 0.999). */
  readonly beta2?: number
  /** Added to √v̂ in the denominator (default 1e-8). */
  readonly eps?: number
  /** Decoupled weight decay coefficient, applied as p ← p·(1 − lr·wd) (default 0.01). */
  readonly weightDecay?: number
  /** Clip the gradients to this global L2 norm before the update (default: no clipping). */
  readonly maxGradNorm?: number
}

export interface AdamWParam {
  readonly name: string
  /** Updated in place by `step`. */
  readonly data: Floats
  /** Whether weight decay applies (false for norm gains, biases and the like). */
  readonly decay: boolean
}

/**
 * A snapshot of the optimizer: the number of steps taken and both moments of every parameter,
 * named `m.<param>` and `v.<param>`, each a 1-D tensor of the parameter's own float type (F32 for
 * a Float32Array parameter, F64 for a Float64Array one), so that `encodeSafetensors` stores them
 * exactly.
 */
export interface AdamWState {
  readonly step: number
  readonly tensors: ReadonlyMap<string, Tensor>
}

interface Slot {
  readonly name: string
  readonly data: Floats
  readonly decay: boolean
  readonly m: Floats
  readonly v: Floats
}

interface Hyper {
  readonly lr: number
  readonly beta1: number
  readonly beta2: number
  readonly eps: number
  readonly weightDecay: number
  readonly maxGradNorm: number | undefined
}

function fail(subject: string, reason: string): never {
  throw new OptimizerError({ subject, reason })
}

function checkLr(lr: number, subject: string): void {
  if (!Number.isFinite(lr) || lr < 0) fail(subject, `must be a finite number ≥ 0, got ${lr}`)
}

function hyperparameters(o: AdamWOptions): Hyper {
  const h: Hyper = {
    lr: o.lr,
    beta1: o.beta1 ?? 0.9,
    beta2: o.beta2 ?? 0.999,
    eps: o.eps ?? 1e-8,
    weightDecay: o.weightDecay ?? 0.01,
    maxGradNorm: o.maxGradNorm,
  }
  checkLr(h.lr, "lr")
  for (const key of ["beta1", "beta2"] as const) {
    const b = h[key]
    if (!(b >= 0 && b < 1)) fail(key, `must be in [0, 1), got ${b}`)
  }
  if (!(h.eps > 0 && Number.isFinite(h.eps)))
    fail("eps", `must be a finite number > 0, got ${h.eps}`)
  if (!(h.weightDecay >= 0 && Number.isFinite(h.weightDecay))) {
    fail("weightDecay", `must be a finite number ≥ 0, got ${h.weightDecay}`)
  }
  if (h.maxGradNorm !== undefined && !(h.maxGradNorm > 0 && Number.isFinite(h.maxGradNorm))) {
    fail("maxGradNorm", `must be a finite number > 0, got ${h.maxGradNorm}`)
  }
  return h
}

const zerosLike = (a: Floats): Floats =>
  a instanceof Float64Array ? new Float64Array(a.length) : new Float32Array(a.length)

const momentTensor = (a: Floats): Tensor =>
  a instanceof Float64Array
    ? { dtype: "F64", shape: [a.length], data: a.slice() }
    : { dtype: "F32", shape: [a.length], data: a.slice() }

/**
 * AdamW (Loshchilov & Hutter), as in PyTorch's `torch.optim.AdamW`, updating named parameters in
 * place. For each parameter p with gradient g at step t (counting from 1):
 *
 *   g ← g · c                      c = min(1, maxGradNorm / ‖all gradients‖₂) when clipping
 *   p ← p · (1 − lr·wd)            only when the parameter has decay: true
 *   m ← β₁·m + (1 − β₁)·g
 *   v ← β₂·v + (1 − β₂)·g²
 *   p ← p − lr · m̂ / (√v̂ + ε)     m̂ = m / (1 − β₁ᵗ), v̂ = v / (1 − β₂ᵗ)
 *
 * Arithmetic is in f64; the moments are stored in the parameter's own array type, so a
 * Float32Array parameter keeps f32 moments, as PyTorch does. The gradients are not modified.
 */
export class AdamW {
  private readonly hyper: Hyper
  private readonly slots: readonly Slot[]
  private readonly byName: ReadonlyMap<string, Slot>
  private t = 0

  constructor(options: AdamWOptions, params: readonly AdamWParam[]) {
    this.hyper = hyperparameters(options)
    const byName = new Map<string, Slot>()
    for (const p of params) {
      if (!(p.data instanceof Float32Array || p.data instanceof Float64Array)) {
        fail(p.name, "parameter data must be a Float32Array or Float64Array")
      }
      if (byName.has(p.name)) fail(p.name, "parameter name appears twice")
      byName.set(p.name, {
        name: p.name,
        data: p.data,
        decay: p.decay,
        m: zerosLike(p.data),
        v: zerosLike(p.data),
      })
    }
    this.slots = [...byName.values()]
    this.byName = byName
  }

  /** Steps taken so far (the t of the last update; 0 before the first). */
  get stepCount(): number {
    return this.t
  }

  /**
   * One update of every parameter, with `lr` (for a schedule) or the constructor's learning
   * rate. Every parameter needs a gradient of its own length, and every gradient a parameter;
   * a gradient with NaN or ±Infinity is refused. On OptimizerError nothing has changed.
   * Returns the global L2 norm of the gradients before clipping.
   */
  step(grads: ReadonlyMap<string, Floats>, lr?: number): number {
    const rate = lr ?? this.hyper.lr
    checkLr(rate, "lr")
    for (const name of grads.keys()) {
      if (!this.byName.has(name)) fail(name, "gradient for an unknown parameter")
    }
    let sumSquares = 0
    const gs: Floats[] = []
    for (const s of this.slots) {
      const g = grads.get(s.name)
      if (g === undefined) return fail(s.name, "no gradient for this parameter")
      if (g.length !== s.data.length) {
        fail(s.name, `gradient has ${g.length} elements, the parameter has ${s.data.length}`)
      }
      let sq = 0
      for (let i = 0; i < g.length; i++) {
        const x = g[i] as number
        sq += x * x
      }
      if (!Number.isFinite(sq)) fail(s.name, "gradient is not finite (NaN or ±Infinity)")
      sumSquares += sq
      gs.push(g)
    }
    const norm = Math.sqrt(sumSquares)
    const maxNorm = this.hyper.maxGradNorm
    const scale = maxNorm !== undefined && norm > maxNorm ? maxNorm / norm : 1

    const { beta1, beta2, eps, weightDecay } = this.hyper
    this.t += 1
    const correction1 = 1 - beta1 ** this.t
    const correction2 = 1 - beta2 ** this.t
    this.slots.forEach((s, k) => {
      const g = gs[k] as Floats
      const { data, m, v } = s
      const shrink = s.decay ? 1 - rate * weightDecay : 1
      for (let i = 0; i < data.length; i++) {
        const gi = (g[i] as number) * scale
        const mi = beta1 * (m[i] as number) + (1 - beta1) * gi
        const vi = beta2 * (v[i] as number) + (1 - beta2) * gi * gi
        m[i] = mi
        v[i] = vi
        // Read back through the array so that f32 moments are used exactly as they are stored.
        const mHat = (m[i] as number) / correction1
        const vHat = (v[i] as number) / correction2
        data[i] = (data[i] as number) * shrink - (rate * mHat) / (Math.sqrt(vHat) + eps)
      }
    })
    return norm
  }

  /** A copy of the step count and moments, to checkpoint (see encodeAdamWState). */
  state(): AdamWState {
    const tensors = new Map<string, Tensor>()
    for (const s of this.slots) {
      tensors.set(`m.${s.name}`, momentTensor(s.m))
      tensors.set(`v.${s.name}`, momentTensor(s.v))
    }
    return { step: this.t, tensors }
  }

  /**
   * An optimizer over `params` that continues exactly from `state` (moments copied in): the
   * next step gives bit-for-bit the parameters the original optimizer would have. The state
   * must hold m and v of every parameter, of its length and float type, and nothing else.
   */
  static restore(options: AdamWOptions, params: readonly AdamWParam[], state: AdamWState): AdamW {
    const opt = new AdamW(options, params)
    if (!Number.isSafeInteger(state.step) || state.step < 0) {
      fail("step", `must be a non-negative integer, got ${state.step}`)
    }
    const expected = new Set<string>()
    for (const s of opt.slots) {
      for (const [kind, target] of [
        ["m", s.m],
        ["v", s.v],
      ] as const) {
        const key = `${kind}.${s.name}`
        expected.add(key)
        const t = state.tensors.get(key)
        if (t === undefined) return fail(key, "missing from the optimizer state")
        const want = target instanceof Float64Array ? "F64" : "F32"
        if (t.dtype !== want) fail(key, `is ${t.dtype}, the parameter needs ${want}`)
        if (t.data.length !== target.length) {
          fail(key, `has ${t.data.length} elements, the parameter has ${target.length}`)
        }
        target.set(t.data as Floats)
      }
    }
    for (const key of state.tensors.keys()) {
      if (!expected.has(key)) fail(key, "in the optimizer state but not a moment of any parameter")
    }
    opt.t = state.step
    return opt
  }
}

/** The optimizer state as a safetensors file (`__metadata__`: optimizer "adamw", step). */
export function encodeAdamWState(state: AdamWState): Uint8Array {
  return encodeSafetensors(state.tensors, { optimizer: "adamw", step: String(state.step) })
}

/** The optimizer state from `encodeAdamWState` bytes (SafetensorsError on a corrupt file). */
export function decodeAdamWState(bytes: Uint8Array): AdamWState {
  const { tensors, metadata } = decodeSafetensors(bytes)
  if (metadata.optimizer !== "adamw") {
    fail("optimizer", `state file is for ${JSON.stringify(metadata.optimizer)}, not "adamw"`)
  }
  const step = Number(metadata.step)
  if (metadata.step === undefined || !/^\d+$/.test(metadata.step) || !Number.isSafeInteger(step)) {
    fail("step", `metadata step ${JSON.stringify(metadata.step)} is not a non-negative integer`)
  }
  return { step, tensors }
}
