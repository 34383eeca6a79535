import { describe, expect, it } from "vitest"
import type { Floats } from "../kernels/kernels.ts"
import { Rng } from "../rng.ts"
import { weightedNll } from "./losses.ts"
import { TinyMoe } from "./model.ts"
import { paramEntries } from "./params.ts"
import type { Routing } from "./routing.ts"

const config = {
  vocabSize: 11,
  dModel: 8,
  nLayers: 2,
  nHeads: 2,
  nExperts: 4,
  topK: 2,
  dFf: 6,
  maxSeqLen: 16,
}
const ids = [3, 7, 1, 9, 4, 4, 10]
const T = ids.length

/** Weights far from the tiny init so every term contributes visibly to the loss. */
const makeModel = (seed: number) => {
  const model = TinyMoe.create({ config, seed, precision: "f64" })
  const rng = new Rng(seed + 100)
  for (const entry of model.entries()) {
    const isGain = /Norm$/.test(entry.name)
    for (let i = 0; i < entry.data.length; i++)
      entry.data[i] = isGain ? 1 + 0.2 * rng.normal() : 0.4 * rng.normal()
  }
  return model
}

const rng = new Rng(7)
const weights = Array.from({ length: T }, () => 0.5 + rng.next())
const valueWeights = Float64Array.from({ length: T }, () => rng.normal())
const targets = [...ids.slice(1), 0]
const AUX = 0.3

/** Loss covering every head: token NLL, a linear functional of the values, the load-balancing loss. */
const lossOf = (model: TinyMoe, replay?: Routing) => {
  const result = model.score(ids, replay ? { replay } : {})
  const tape = result.tape
  if (!tape) throw new Error("no tape")
  const nll = weightedNll(result.logits, targets, weights, model.config.vocabSize, T)
  let valueTerm = 0
  for (let t = 0; t < T; t++)
    valueTerm += (valueWeights[t] as number) * (result.values[t] as number)
  return {
    loss: nll.loss + valueTerm + AUX * model.auxLoss(tape),
    nll,
    tape,
    routing: result.routing,
  }
}

const sameRouting = (a: Routing, b: Routing) => a.every((v, i) => v === b[i])

const check = (model: TinyMoe, groups: RegExp, replay?: Routing) => {
  const base = lossOf(model, replay)
  const grads = paramEntries(
    model.config,
    model.backward(base.tape, base.nll.dLogits, valueWeights, { auxLossCoef: AUX }),
  )
  const pick = new Rng(11)
  const eps = 1e-5
  let checked = 0
  let flipped = 0
  const worst: string[] = []
  for (const entry of model.entries()) {
    if (!groups.test(entry.name)) continue
    const grad = grads.find((g) => g.name === entry.name)?.data
    if (!grad) throw new Error(`no gradient for ${entry.name}`)
    const coords =
      entry.data.length <= 16
        ? [...entry.data.keys()]
        : Array.from({ length: 16 }, () => Math.floor(pick.next() * entry.data.length))
    for (const i of coords) {
      const saved = entry.data[i] as number
      entry.data[i] = saved + eps
      const plus = lossOf(model, replay)
      entry.data[i] = saved - eps
      const minus = lossOf(model, replay)
      entry.data[i] = saved
      // Recomputed routing is piecewise: a perturbation that changes a top-k choice has no derivative.
      if (!sameRouting(plus.routing, base.routing) || !sameRouting(minus.routing, base.routing)) {
        flipped++
        continue
      }
      const numeric = (plus.loss - minus.loss) / (2 * eps)
      const analytic = grad[i] as number
      checked++
      if (Math.abs(numeric - analytic) > 1e-6 + 1e-5 * Math.abs(numeric))
        worst.push(`${entry.name}[${i}]: analytic ${analytic}, numeric ${numeric}`)
    }
  }
  return { checked, flipped, worst }
}

describe("TinyMoE gradients against central finite differences (float64)", () => {
  const model = makeModel(1)

  it.each([
    ["embedding", /^embed$/],
    ["attention (q, k, v, o projections)", /\.w[qkvo]$/],
    ["norms", /Norm$/],
    ["SwiGLU experts (gate, up, down)", /\.w(Gate|Up|Down)$/],
    ["per-head query and key norms", /\.[qk]Norm$/],
    ["router, routing recomputed", /\.router$/],
    ["lm head and value head", /^(lmHead|valueHead|valueBias)$/],
  ])("%s", (_name, groups) => {
    const { checked, flipped, worst } = check(model, groups)
    expect(worst).toEqual([])
    expect(checked).toBeGreaterThan(0)
    expect(flipped).toBeLessThanOrEqual(checked / 10)
  })

  it("router and every other group under replayed routing (R3), including experts the router would not pick", () => {
    const rng = new Rng(5)
    const replay = new Uint8Array(T * config.nLayers * config.topK)
    for (let r = 0; r < T * config.nLayers; r++) {
      const first = Math.floor(rng.next() * config.nExperts)
      replay[r * 2] = first
      replay[r * 2 + 1] =
        (first + 1 + Math.floor(rng.next() * (config.nExperts - 1))) % config.nExperts
    }
    const recomputed = lossOf(model).routing
    expect(sameRouting(replay, recomputed)).toBe(false)
    const { checked, flipped, worst } = check(model, /./, replay)
    expect(worst).toEqual([])
    expect(flipped).toBe(0)
    expect(checked).toBeGreaterThan(200)
  })

  it("the load-balancing term changes the router gradient and nothing upstream of the router logits only", () => {
    const base = lossOf(model)
    const withAux = paramEntries(
      model.config,
      model.backward(base.tape, base.nll.dLogits, valueWeights, { auxLossCoef: AUX }),
    )
    const without = paramEntries(
      model.config,
      model.backward(base.tape, base.nll.dLogits, valueWeights),
    )
    const diff = (name: string) => {
      const a = withAux.find((e) => e.name === name)?.data
      const b = without.find((e) => e.name === name)?.data
      if (!a || !b) return Number.NaN
      let max = 0
      for (let i = 0; i < a.length; i++)
        max = Math.max(max, Math.abs((a[i] as number) - (b[i] as number)))
      return max
    }
    expect(diff("layers.1.router")).toBeGreaterThan(1e-6)
    expect(diff("lmHead")).toBe(0)
    expect(diff("layers.1.wDown")).toBe(0)
  })
})

describe("tied embeddings: the embedding gets the output layer's gradient too", () => {
  const tied = TinyMoe.create({
    config: { ...config, tieWordEmbeddings: true },
    seed: 5,
    precision: "f64",
  })
  const rng = new Rng(105)
  for (const entry of tied.entries()) {
    const isGain = /Norm$/.test(entry.name)
    for (let i = 0; i < entry.data.length; i++)
      entry.data[i] = isGain ? 1 + 0.2 * rng.normal() : 0.4 * rng.normal()
  }
  it("embedding and final norm", () => {
    expect(tied.entries().find((e) => e.name === "lmHead")?.data.length).toBe(0)
    const { checked, flipped, worst } = check(tied, /^embed$|^finalNorm$/)
    expect(worst).toEqual([])
    expect(checked).toBeGreaterThan(0)
    expect(flipped).toBeLessThanOrEqual(checked / 10)
  })
})

describe("a dense MLP layer among MoE layers (Qwen3's mlp_only_layers)", () => {
  const mixed = TinyMoe.create({
    config: { ...config, nLayers: 3, mlpOnlyLayers: [1], denseFf: 10 },
    seed: 6,
    precision: "f64",
  })
  const rng = new Rng(106)
  for (const entry of mixed.entries()) {
    const isGain = /Norm$/.test(entry.name)
    for (let i = 0; i < entry.data.length; i++)
      entry.data[i] = isGain ? 1 + 0.2 * rng.normal() : 0.4 * rng.normal()
  }
  it("dense and sparse feed-forwards and routers, routing recomputed", () => {
    expect(mixed.entries().find((e) => e.name === "layers.1.wGate")?.shape).toEqual([1, 8, 10])
    expect(mixed.entries().find((e) => e.name === "layers.1.router")?.data.length).toBe(0)
    const { checked, flipped, worst } = check(mixed, /\.(w(Gate|Up|Down)|router)$/)
    expect(worst).toEqual([])
    expect(checked).toBeGreaterThan(0)
    expect(flipped).toBeLessThanOrEqual(checked / 10)
  })
  it("records no expert for the dense layer", () => {
    const { routing } = mixed.score(ids, {})
    for (let r = 0; r < T; r++)
      expect([routing[(r * 3 + 1) * 2], routing[(r * 3 + 1) * 2 + 1]]).toEqual([0, 0])
  })
})

describe("grouped-query attention gradients (2 key/value heads for 4 query heads, headDim ≠ dModel / nHeads)", () => {
  const gqa = TinyMoe.create({
    config: { ...config, nHeads: 4, nKvHeads: 2, headDim: 6 },
    seed: 3,
    precision: "f64",
  })
  const rng = new Rng(103)
  for (const entry of gqa.entries()) {
    const isGain = /Norm$/.test(entry.name)
    for (let i = 0; i < entry.data.length; i++)
      entry.data[i] = isGain ? 1 + 0.2 * rng.normal() : 0.4 * rng.normal()
  }

  it.each([
    ["attention projections", /\.w[qkvo]$/],
    ["query and key norms", /\.[qk]Norm$/],
    ["embedding and experts", /^embed$|\.w(Gate|Up|Down)$/],
  ])("%s", (_name, groups) => {
    const { checked, flipped, worst } = check(gqa, groups)
    expect(worst).toEqual([])
    expect(checked).toBeGreaterThan(0)
    expect(flipped).toBeLessThanOrEqual(checked / 10)
  })
})

describe("gradients over several attention tiles (float64, 150 positions)", () => {
  const long = { ...config, maxSeqLen: 160 }
  const model = TinyMoe.create({ config: long, seed: 2, precision: "f64" })
  const r = new Rng(3)
  for (const entry of model.entries()) {
    const isGain = /Norm$/.test(entry.name)
    for (let i = 0; i < entry.data.length; i++)
      entry.data[i] = isGain ? 1 + 0.2 * r.normal() : 0.4 * r.normal()
  }
  const n = 150
  const seq = Array.from({ length: n }, () => Math.floor(r.next() * long.vocabSize))
  const w = Array.from({ length: n }, () => r.next())
  const tgt = [...seq.slice(1), 0]
  // Replayed routing keeps the loss smooth in every weight.
  const replay = new Uint8Array(n * long.nLayers * long.topK)
  for (let i = 0; i < replay.length; i += 2) {
    replay[i] = Math.floor(r.next() * 4)
    replay[i + 1] = ((replay[i] as number) + 1 + Math.floor(r.next() * 3)) % 4
  }
  const loss = () => {
    const result = model.score(seq, { replay })
    const tape = result.tape
    if (!tape) throw new Error("no tape")
    return { nll: weightedNll(result.logits, tgt, w, long.vocabSize, n), tape }
  }

  it("attention projections and embedding match central differences", () => {
    const base = loss()
    const grads = paramEntries(model.config, model.backward(base.tape, base.nll.dLogits))
    const pick = new Rng(17)
    const eps = 1e-5
    const worst: string[] = []
    let checked = 0
    for (const entry of model.entries()) {
      if (!/(\.w[qkv]$|^embed$)/.test(entry.name)) continue
      const grad = grads.find((g) => g.name === entry.name)?.data as Floats
      for (let c = 0; c < 6; c++) {
        const i = Math.floor(pick.next() * entry.data.length)
        const saved = entry.data[i] as number
        entry.data[i] = saved + eps
        const plus = loss().nll.loss
        entry.data[i] = saved - eps
        const minus = loss().nll.loss
        entry.data[i] = saved
        const numeric = (plus - minus) / (2 * eps)
        checked++
        if (Math.abs(numeric - (grad[i] as number)) > 1e-6 + 1e-5 * Math.abs(numeric))
          worst.push(`${entry.name}[${i}]: analytic ${grad[i]}, numeric ${numeric}`)
      }
    }
    expect(worst).toEqual([])
    expect(checked).toBe(6 * (1 + 3 * long.nLayers))
  })
})
