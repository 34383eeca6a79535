import { describe, expect, it } from "vitest"
import { Rng } from "../rng.ts"
import { SafetensorsError } from "../weights/errors.ts"
import { decodeSafetensors, encodeSafetensors } from "../weights/safetensors.ts"
import {
  AdamW,
  type AdamWOptions,
  type AdamWParam,
  type AdamWState,
  decodeAdamWState,
  encodeAdamWState,
  type Floats,
} from "./adamw.ts"
import { OptimizerError } from "./errors.ts"

const grads = (entries: Record<string, number[] | Floats>) =>
  new Map(
    Object.entries(entries).map(([k, v]): [string, Floats] => [
      k,
      Array.isArray(v) ? new Float64Array(v) : v,
    ]),
  )

function errorOf(f: () => unknown): OptimizerError {
  try {
    f()
  } catch (e) {
    if (e instanceof OptimizerError) return e
    throw e
  }
  throw new Error("expected an OptimizerError")
}

const moment = (opt: AdamW, key: string): number[] =>
  [...(opt.state().tensors.get(key)?.data ?? [])].map(Number)

describe("AdamW", () => {
  it("matches a hand-computed update, step by step", () => {
    const p = new Float64Array([1])
    const opt = new AdamW({ lr: 0.1, weightDecay: 0.01 }, [{ name: "w", data: p, decay: true }])

    // t = 1, g = 0.5:
    //   m = 0.9·0 + 0.1·0.5 = 0.05            m̂ = 0.05 / (1 − 0.9) = 0.5
    //   v = 0.999·0 + 0.001·0.25 = 0.00025    v̂ = 0.00025 / (1 − 0.999) = 0.25, √v̂ = 0.5
    //   p = 1·(1 − 0.1·0.01) − 0.1 · 0.5 / (0.5 + 1e-8) = 0.999 − 0.099999998 = 0.899000002
    expect(opt.step(grads({ w: [0.5] }))).toBe(0.5)
    expect(opt.stepCount).toBe(1)
    expect(moment(opt, "m.w")[0]).toBeCloseTo(0.05, 15)
    expect(moment(opt, "v.w")[0]).toBeCloseTo(0.00025, 15)
    expect(p[0]).toBeCloseTo(0.899000002, 14)

    // t = 2, g = −1:
    //   m = 0.9·0.05 + 0.1·(−1) = −0.055       m̂ = −0.055 / (1 − 0.9²) = −0.055 / 0.19 = −0.28947368…
    //   v = 0.999·0.00025 + 0.001·1 = 0.00124975
    //                                          v̂ = 0.00124975 / (1 − 0.999²) = 0.00124975 / 0.001999 = 0.62518759…
    //   p = 0.899000002·0.999 − 0.1 · (−0.28947368…) / (√0.62518759… + 1e-8) = 0.93471135…
    expect(opt.step(grads({ w: [-1] }))).toBe(1)
    expect(moment(opt, "m.w")[0]).toBeCloseTo(-0.055, 15)
    expect(moment(opt, "v.w")[0]).toBeCloseTo(0.00124975, 15)
    const mHat = -0.055 / 0.19
    const vHat = 0.00124975 / 0.001999
    expect(p[0]).toBeCloseTo(0.899000002 * 0.999 - (0.1 * mHat) / (Math.sqrt(vHat) + 1e-8), 14)
    expect(p[0]).toBeCloseTo(0.9347113542385653, 14)
  })

  it("keeps f32 moments for an f32 parameter", () => {
    const p = new Float32Array([1, 2])
    const opt = new AdamW({ lr: 0.01 }, [{ name: "w", data: p, decay: true }])
    opt.step(grads({ w: [0.1, 0.2] }))
    const m = opt.state().tensors.get("m.w")
    expect(m?.dtype).toBe("F32")
    expect(m?.data).toEqual(new Float32Array([0.1 * 0.1, 0.1 * 0.2]))
  })

  it("applies weight decay only to parameters with decay: true", () => {
    const decayed = new Float64Array([2, -4])
    const gain = new Float64Array([2, -4])
    const opt = new AdamW({ lr: 0.5, weightDecay: 0.1 }, [
      { name: "w", data: decayed, decay: true },
      { name: "g", data: gain, decay: false },
    ])
    // With zero gradients the Adam term is 0 / (0 + ε) = 0: only the decay moves anything.
    opt.step(grads({ w: [0, 0], g: [0, 0] }))
    expect([...decayed]).toEqual([2 * (1 - 0.05), -4 * (1 - 0.05)])
    expect([...gain]).toEqual([2, -4])
  })

  it("clips the gradients to maxGradNorm and returns the norm before clipping", () => {
    const clipped = new Float64Array([1, 1])
    const reference = new Float64Array([1, 1])
    const a = new AdamW({ lr: 0.1, maxGradNorm: 1 }, [{ name: "w", data: clipped, decay: true }])
    const b = new AdamW({ lr: 0.1 }, [{ name: "w", data: reference, decay: true }])
    const g = new Float64Array([3, 4])
    expect(a.step(new Map([["w", g]]))).toBe(5)
    expect([...g]).toEqual([3, 4]) // the gradient itself is not scaled
    const [m0, m1] = moment(a, "m.w")
    expect(m0).toBeCloseTo(0.1 * 0.6, 15)
    expect(m1).toBeCloseTo(0.1 * 0.8, 15)
    // Exactly what an unclipped optimizer does with the gradient scaled by 1/5 beforehand.
    b.step(grads({ w: [3 * (1 / 5), 4 * (1 / 5)] }))
    expect([...clipped]).toEqual([...reference])

    // The norm is global over every parameter, and below the threshold nothing is scaled.
    const x = new Float64Array([0])
    const y = new Float64Array([0])
    const c = new AdamW({ lr: 0.1, maxGradNorm: 10 }, [
      { name: "x", data: x, decay: false },
      { name: "y", data: y, decay: false },
    ])
    expect(c.step(grads({ x: [3], y: [4] }))).toBe(5)
    expect(moment(c, "m.x")[0]).toBeCloseTo(0.3, 15)
    expect(moment(c, "m.y")[0]).toBeCloseTo(0.4, 15)
  })

  it("uses the learning rate passed to step", () => {
    const p = new Float64Array([1])
    const opt = new AdamW({ lr: 1 }, [{ name: "w", data: p, decay: true }])
    opt.step(grads({ w: [1] }), 0)
    expect(p[0]).toBe(1)
    expect(opt.stepCount).toBe(1)
  })

  it("minimises a quadratic", () => {
    const target = [3, -2, 0.5]
    const x = new Float32Array(3)
    const opt = new AdamW({ lr: 0.05, weightDecay: 0 }, [{ name: "x", data: x, decay: true }])
    for (let i = 0; i < 1500; i++) {
      const g = new Float32Array(3).map((_, j) => 2 * ((x[j] as number) - (target[j] as number)))
      opt.step(new Map([["x", g]]))
    }
    for (let j = 0; j < 3; j++) expect(x[j]).toBeCloseTo(target[j] as number, 3)
  })

  it("refuses missing, unknown, mis-sized and non-finite gradients without changing anything", () => {
    const w = new Float64Array([1, 2])
    const b = new Float64Array([3])
    const opt = new AdamW({ lr: 0.1 }, [
      { name: "w", data: w, decay: true },
      { name: "b", data: b, decay: false },
    ])
    expect(errorOf(() => opt.step(grads({ w: [1, 1] }))).message).toBe(
      "b: no gradient for this parameter",
    )
    expect(errorOf(() => opt.step(grads({ w: [1, 1], b: [1], c: [1] }))).message).toBe(
      "c: gradient for an unknown parameter",
    )
    expect(errorOf(() => opt.step(grads({ w: [1], b: [1] }))).message).toBe(
      "w: gradient has 1 elements, the parameter has 2",
    )
    expect(errorOf(() => opt.step(grads({ w: [1, 1], b: [Number.NaN] }))).message).toBe(
      "b: gradient is not finite (NaN or ±Infinity)",
    )
    expect(errorOf(() => opt.step(grads({ w: [1, 1], b: [1] }), -1)).message).toBe(
      "lr: must be a finite number ≥ 0, got -1",
    )
    expect([...w, ...b]).toEqual([1, 2, 3])
    expect(opt.stepCount).toBe(0)
  })

  it("leaves parameters and moments alone when a step is refused", () => {
    const w = new Float64Array([1, 2])
    const opt = new AdamW({ lr: 0.1 }, [{ name: "w", data: w, decay: true }])
    const before = opt.state()
    expect(() => opt.step(grads({ w: [1, Number.POSITIVE_INFINITY] }))).toThrow(OptimizerError)
    expect([...w]).toEqual([1, 2])
    expect(opt.stepCount).toBe(0)
    expect(opt.state()).toEqual(before)
  })

  it("checks its hyperparameters and parameters", () => {
    const p = (): AdamWParam[] => [{ name: "w", data: new Float32Array(1), decay: true }]
    const message = (o: AdamWOptions, params = p()) => errorOf(() => new AdamW(o, params)).message
    expect(message({ lr: -0.1 })).toBe("lr: must be a finite number ≥ 0, got -0.1")
    expect(message({ lr: 0.1, beta1: 1 })).toBe("beta1: must be in [0, 1), got 1")
    expect(message({ lr: 0.1, beta2: Number.NaN })).toBe("beta2: must be in [0, 1), got NaN")
    expect(message({ lr: 0.1, eps: 0 })).toBe("eps: must be a finite number > 0, got 0")
    expect(message({ lr: 0.1, weightDecay: -1 })).toBe(
      "weightDecay: must be a finite number ≥ 0, got -1",
    )
    expect(message({ lr: 0.1, maxGradNorm: 0 })).toBe(
      "maxGradNorm: must be a finite number > 0, got 0",
    )
    expect(message({ lr: 0.1 }, [...p(), ...p()])).toBe("w: parameter name appears twice")
  })
})

describe("AdamW state", () => {
  const options: AdamWOptions = { lr: 1e-2, weightDecay: 0.1, maxGradNorm: 1 }

  const freshParams = (): AdamWParam[] => {
    const rng = new Rng(1)
    return [
      { name: "blocks.0.wq", data: new Float32Array(12).map(() => rng.normal()), decay: true },
      { name: "blocks.0.norm", data: new Float32Array(4).fill(1), decay: false },
      { name: "head", data: new Float64Array(6).map(() => rng.normal()), decay: true },
    ]
  }

  /** Deterministic gradients for step t. */
  const gradientsAt = (params: readonly AdamWParam[], t: number): Map<string, Floats> => {
    const rng = new Rng(1000 + t)
    return new Map(
      params.map((p): [string, Floats] => [
        p.name,
        p.data instanceof Float64Array
          ? new Float64Array(p.data.length).map(() => rng.normal())
          : new Float32Array(p.data.length).map(() => rng.normal()),
      ]),
    )
  }

  const paramBytes = (params: readonly AdamWParam[]): Uint8Array =>
    encodeSafetensors(
      new Map(
        params.map((p) => [
          p.name,
          p.data instanceof Float64Array
            ? { dtype: "F64" as const, shape: [p.data.length], data: p.data }
            : { dtype: "F32" as const, shape: [p.data.length], data: p.data },
        ]),
      ),
    )

  it("save → restore → step is bit-identical to an uninterrupted run", () => {
    const straight = freshParams()
    const a = new AdamW(options, straight)
    for (let t = 0; t < 10; t++) a.step(gradientsAt(straight, t), 1e-2 * (1 - t / 20))

    const first = freshParams()
    const b = new AdamW(options, first)
    for (let t = 0; t < 5; t++) b.step(gradientsAt(first, t), 1e-2 * (1 - t / 20))
    // Checkpoint parameters and optimizer through safetensors bytes, then start over from them.
    const savedParams = decodeSafetensors(paramBytes(first)).tensors
    const savedState = decodeAdamWState(encodeAdamWState(b.state()))
    expect(savedState.step).toBe(5)
    const resumed: AdamWParam[] = first.map((p) => {
      const data = savedParams.get(p.name)?.data
      if (!(data instanceof Float32Array || data instanceof Float64Array)) throw new Error(p.name)
      return { name: p.name, data: data.slice(), decay: p.decay }
    })
    const c = AdamW.restore(options, resumed, savedState)
    expect(c.stepCount).toBe(5)
    for (let t = 5; t < 10; t++) c.step(gradientsAt(resumed, t), 1e-2 * (1 - t / 20))

    expect(paramBytes(resumed)).toEqual(paramBytes(straight))
    expect(encodeAdamWState(c.state())).toEqual(encodeAdamWState(a.state()))
  })

  it("names its tensors m.<param> and v.<param>, with the parameter's float type", () => {
    const opt = new AdamW(options, freshParams())
    const s = opt.state()
    expect(s.step).toBe(0)
    expect([...s.tensors].map(([k, t]) => `${k}:${t.dtype}[${t.shape}]`)).toEqual([
      "m.blocks.0.wq:F32[12]",
      "v.blocks.0.wq:F32[12]",
      "m.blocks.0.norm:F32[4]",
      "v.blocks.0.norm:F32[4]",
      "m.head:F64[6]",
      "v.head:F64[6]",
    ])
  })

  it("state() is a copy", () => {
    const params = freshParams()
    const opt = new AdamW(options, params)
    const s = opt.state()
    opt.step(gradientsAt(params, 0))
    expect([...(s.tensors.get("m.head")?.data ?? [])]).toEqual([0, 0, 0, 0, 0, 0])
  })

  it("restore refuses a state that does not fit the parameters", () => {
    const good = new AdamW(options, freshParams()).state()
    const without = (key: string): AdamWState => {
      const tensors = new Map(good.tensors)
      tensors.delete(key)
      return { step: 3, tensors }
    }
    const restoreError = (s: AdamWState) =>
      errorOf(() => AdamW.restore(options, freshParams(), s)).message
    expect(restoreError(without("v.head"))).toBe("v.head: missing from the optimizer state")
    const extra = new Map(good.tensors)
    extra.set("m.gone", { dtype: "F32", shape: [1], data: new Float32Array(1) })
    expect(restoreError({ step: 1, tensors: extra })).toBe(
      "m.gone: in the optimizer state but not a moment of any parameter",
    )
    const wrongType = new Map(good.tensors)
    wrongType.set("m.head", { dtype: "F32", shape: [6], data: new Float32Array(6) })
    expect(restoreError({ step: 1, tensors: wrongType })).toBe(
      "m.head: is F32, the parameter needs F64",
    )
    const wrongLength = new Map(good.tensors)
    wrongLength.set("m.head", { dtype: "F64", shape: [5], data: new Float64Array(5) })
    expect(restoreError({ step: 1, tensors: wrongLength })).toBe(
      "m.head: has 5 elements, the parameter has 6",
    )
    expect(restoreError({ step: -1, tensors: good.tensors })).toBe(
      "step: must be a non-negative integer, got -1",
    )
  })

  it("decodeAdamWState checks the metadata and the file", () => {
    const tensors = new AdamW(options, freshParams()).state().tensors
    expect(errorOf(() => decodeAdamWState(encodeSafetensors(tensors, { step: "1" }))).message).toBe(
      'optimizer: state file is for undefined, not "adamw"',
    )
    const badStep = encodeSafetensors(tensors, { optimizer: "adamw", step: "1.5" })
    expect(errorOf(() => decodeAdamWState(badStep)).message).toBe(
      'step: metadata step "1.5" is not a non-negative integer',
    )
    expect(() => decodeAdamWState(new Uint8Array(3))).toThrow(SafetensorsError)
  })
})
