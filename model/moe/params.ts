import type { Floats } from "../kernels/kernels.ts"
import { Rng } from "../rng.ts"
import { headDim, kvWidth, layerFfn, queryWidth, type TinyMoeConfig } from "./config.ts"

export type Precision = "f32" | "f64"

export const allocFloats = (precision: Precision, n: number): Floats =>
  precision === "f32" ? new Float32Array(n) : new Float64Array(n)

/**
 * One decoder layer, matrices stored [in, out] (the kernels' layout; Hugging Face's Linear is
 * [out, in], and weights.ts transposes on the way in and out). qW = nHeads · headDim, kvW =
 * nKvHeads · headDim.
 */
export interface LayerParams {
  readonly attnNorm: Floats // [d]
  readonly wq: Floats // [d, qW]
  readonly wk: Floats // [d, kvW]
  readonly wv: Floats // [d, kvW]
  readonly wo: Floats // [qW, d]
  /** RMSNorm gain over each head's query and key (Qwen3's q_norm, k_norm), before RoPE. */
  readonly qNorm: Floats // [headDim]
  readonly kNorm: Floats // [headDim]
  readonly ffnNorm: Floats // [d]
  readonly router: Floats // [d, E]
  /** SwiGLU experts: down(silu(x · gate) ⊙ (x · up)). */
  readonly wGate: Floats // [E, d, F]
  readonly wUp: Floats // [E, d, F]
  readonly wDown: Floats // [E, F, d]
}

export interface Params {
  readonly embed: Floats // [V, d]
  readonly layers: ReadonlyArray<LayerParams>
  readonly finalNorm: Floats // [d]
  /** [d, V]; empty when the config ties the output to the embedding (logits = f · embedᵀ). */
  readonly lmHead: Floats
  readonly valueHead: Floats // [d]
  readonly valueBias: Floats // [1]
}

/** One named tensor of the model, as saved in safetensors and updated by the optimiser. */
export interface ParamEntry {
  readonly name: string
  readonly shape: ReadonlyArray<number>
  readonly data: Floats
  /** Weight decay applies to matrices, not to norm gains and biases. */
  readonly decay: boolean
}

/** Layer l's shapes: a dense layer is one expert of width denseFf and an empty router. */
const layerShapes = (c: TinyMoeConfig, l: number) => {
  const ffn = layerFfn(c, l)
  return {
    attnNorm: [c.dModel],
    wq: [c.dModel, queryWidth(c)],
    wk: [c.dModel, kvWidth(c)],
    wv: [c.dModel, kvWidth(c)],
    wo: [queryWidth(c), c.dModel],
    qNorm: [headDim(c)],
    kNorm: [headDim(c)],
    ffnNorm: [c.dModel],
    router: ffn.moe ? [c.dModel, c.nExperts] : [c.dModel, 0],
    wGate: [ffn.experts, c.dModel, ffn.width],
    wUp: [ffn.experts, c.dModel, ffn.width],
    wDown: [ffn.experts, ffn.width, c.dModel],
  } as const satisfies Record<keyof LayerParams, ReadonlyArray<number>>
}

export const LAYER_KEYS = [
  "attnNorm",
  "wq",
  "wk",
  "wv",
  "wo",
  "qNorm",
  "kNorm",
  "ffnNorm",
  "router",
  "wGate",
  "wUp",
  "wDown",
] as const satisfies ReadonlyArray<keyof LayerParams>

const NORM_KEYS = new Set<string>(["attnNorm", "ffnNorm", "qNorm", "kNorm"])

const size = (shape: ReadonlyArray<number>) => shape.reduce((a, b) => a * b, 1)

/** A tied output layer has no tensor of its own: an empty one keeps every listing's order. */
const lmHeadShape = (c: TinyMoeConfig): ReadonlyArray<number> =>
  c.tieWordEmbeddings ? [0] : [c.dModel, c.vocabSize]

/** Names follow `layers.<i>.<tensor>`; the order is the canonical order of every listing. */
export const paramEntries = (c: TinyMoeConfig, p: Params): ParamEntry[] => {
  const entries: ParamEntry[] = [
    { name: "embed", shape: [c.vocabSize, c.dModel], data: p.embed, decay: true },
  ]
  p.layers.forEach((layer, i) => {
    const shapes = layerShapes(c, i)
    for (const key of LAYER_KEYS) {
      entries.push({
        name: `layers.${i}.${key}`,
        shape: shapes[key],
        data: layer[key],
        decay: !NORM_KEYS.has(key),
      })
    }
  })
  entries.push(
    { name: "finalNorm", shape: [c.dModel], data: p.finalNorm, decay: false },
    { name: "lmHead", shape: lmHeadShape(c), data: p.lmHead, decay: true },
    { name: "valueHead", shape: [c.dModel], data: p.valueHead, decay: true },
    { name: "valueBias", shape: [1], data: p.valueBias, decay: false },
  )
  return entries
}

/**
 * Every parameter's name and shape in the canonical order, lazily and without allocating: what a
 * loader checks a file against before trusting the config in its header.
 */
export function* paramShapes(
  c: TinyMoeConfig,
): Generator<readonly [string, ReadonlyArray<number>]> {
  yield ["embed", [c.vocabSize, c.dModel]]
  for (let i = 0; i < c.nLayers; i++) {
    const shapes = layerShapes(c, i)
    for (const key of LAYER_KEYS) yield [`layers.${i}.${key}`, shapes[key]]
  }
  yield ["finalNorm", [c.dModel]]
  yield ["lmHead", lmHeadShape(c)]
  yield ["valueHead", [c.dModel]]
  yield ["valueBias", [1]]
}

/** Allocates a parameter set (all zeros) and hands each tensor to `fill`. */
export const buildParams = (
  c: TinyMoeConfig,
  precision: Precision,
  fill: (name: string, shape: ReadonlyArray<number>, data: Floats) => void = () => {},
): Params => {
  const make = (name: string, shape: ReadonlyArray<number>) => {
    const data = allocFloats(precision, size(shape))
    fill(name, shape, data)
    return data
  }
  const layers: LayerParams[] = []
  for (let i = 0; i < c.nLayers; i++) {
    const shapes = layerShapes(c, i)
    const entry = {} as Record<keyof LayerParams, Floats>
    for (const key of LAYER_KEYS) entry[key] = make(`layers.${i}.${key}`, shapes[key])
    layers.push(entry)
  }
  return {
    embed: make("embed", [c.vocabSize, c.dModel]),
    layers,
    finalNorm: make("finalNorm", [c.dModel]),
    lmHead: make("lmHead", lmHeadShape(c)),
    valueHead: make("valueHead", [c.dModel]),
    valueBias: make("valueBias", [1]),
  }
}

/**
 * Deterministic initialisation from a seed: N(0, 0.02) matrices, residual output projections
 * scaled by 1/√(2·layers) (GPT-2), unit norm gains, a zero value head. The same seed gives the
 * same bits on every machine.
 */
export const initParams = (
  c: TinyMoeConfig,
  seed: number,
  precision: Precision = "f32",
): Params => {
  const rng = new Rng(seed)
  const residualScale = 1 / Math.sqrt(2 * c.nLayers)
  return buildParams(c, precision, (name, _shape, data) => {
    const key = name.slice(name.lastIndexOf(".") + 1)
    if (NORM_KEYS.has(key) || name === "finalNorm") data.fill(1)
    else if (name === "valueHead" || name === "valueBias") data.fill(0)
    else {
      const std = key === "wo" || key === "wDown" ? 0.02 * residualScale : 0.02
      for (let i = 0; i < data.length; i++) data[i] = rng.normal() * std
    }
  })
}

/** A zeroed parameter set of the same shapes: gradients, optimiser moments. */
export const zerosLike = (c: TinyMoeConfig, precision: Precision): Params =>
  buildParams(c, precision)

export const countParams = (c: TinyMoeConfig): number =>
  paramEntries(c, buildParams(c, "f32")).reduce((n, e) => n + e.data.length, 0)

/** A new parameter set whose tensors are `f` of this one's (e.g. rounded to bfloat16). */
export const mapParams = (
  c: TinyMoeConfig,
  p: Params,
  precision: Precision,
  f: (data: Floats, name: string) => ArrayLike<number>,
): Params => {
  const source = new Map(paramEntries(c, p).map((e) => [e.name, e.data]))
  return buildParams(c, precision, (name, _shape, data) => {
    const from = source.get(name)
    if (from) data.set(f(from, name))
  })
}

/**
 * A parameter set over existing arrays, given in the canonical order of `paramEntries` (what a
 * worker thread receives): no copy, the arrays become the tensors.
 */
export const paramsFromArrays = (c: TinyMoeConfig, arrays: ReadonlyArray<Floats>): Params => {
  let next = 0
  for (const [name, shape] of paramShapes(c)) {
    const data = arrays[next++]
    if (data === undefined || data.length !== size(shape))
      throw new RangeError(`${name}: expected ${size(shape)} values, got ${data?.length ?? "none"}`)
  }
  if (arrays.length !== next) throw new RangeError(`expected ${next} tensors, got ${arrays.length}`)
  next = 0
  const take = (): Floats => arrays[next++] as Floats
  const embed = take()
  const layers: LayerParams[] = []
  for (let i = 0; i < c.nLayers; i++) {
    const entry = {} as Record<keyof LayerParams, Floats>
    for (const key of LAYER_KEYS) entry[key] = take()
    layers.push(entry)
  }
  return { embed, layers, finalNorm: take(), lmHead: take(), valueHead: take(), valueBias: take() }
}
