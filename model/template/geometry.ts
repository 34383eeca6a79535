import { readFileSync } from "node:fs"
import { join } from "node:path"

/**
 * A Mixture-of-Experts model's routing geometry as its `config.json` gives it: which decoder
 * layers route tokens to experts (dense layers carry no routing), how many routed experts a layer
 * has and how many a token takes. Engines report routing for every decoder layer
 * (`num_hidden_layers`), so the sampler keeps the MoE layers' rows and drops the dense ones'.
 */
export interface MoeGeometry {
  readonly modelType: string
  /** Decoder layers (`num_hidden_layers`): the layers an engine's routing payload covers. */
  readonly hiddenLayers: number
  /** Indices of the layers that route, ascending. */
  readonly moeLayers: ReadonlyArray<number>
  /** Routed experts per MoE layer (shared experts are not routed). */
  readonly numExperts: number
  /** Experts per token per layer (`num_experts_per_tok`). */
  readonly topK: number
}

/** A config.json t1 cannot read an MoE geometry from; names the file. */
export class ModelGeometryError extends Error {
  readonly _tag = "ModelGeometryError"
  constructor(
    readonly file: string,
    readonly reason: string,
  ) {
    super(`${file}: ${reason}`)
    this.name = "ModelGeometryError"
  }
}

type Config = Readonly<Record<string, unknown>>

const count = (file: string, config: Config, key: string, fallback?: number): number => {
  const v = config[key] ?? fallback
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0)
    throw new ModelGeometryError(
      file,
      `${key} must be a non-negative integer, got ${JSON.stringify(v)}`,
    )
  return v
}

const layers = (n: number, routes: (i: number) => boolean) =>
  Array.from({ length: n }, (_, i) => i).filter(routes)

/**
 * The MoE geometry of a config.json's text: Qwen2/Qwen3-MoE (`num_experts`,
 * `decoder_sparse_step`, `mlp_only_layers`), DeepSeek-V2/V3 (`n_routed_experts`,
 * `first_k_dense_replace`, `moe_layer_freq`) and Mixtral-style (`num_local_experts`, every layer).
 * Multimodal configs are read through their `text_config`. Undefined for a model without experts
 * (a dense model: nothing to route, nothing to replay).
 */
export const parseModelGeometry = (text: string, file: string): MoeGeometry | undefined => {
  let root: unknown
  try {
    root = JSON.parse(text)
  } catch (e) {
    throw new ModelGeometryError(file, `not JSON: ${e instanceof Error ? e.message : String(e)}`)
  }
  if (typeof root !== "object" || root === null || Array.isArray(root))
    throw new ModelGeometryError(file, "not a JSON object")
  const top = root as Config
  const textConfig = top.text_config
  const c: Config =
    typeof textConfig === "object" && textConfig !== null ? (textConfig as Config) : top
  const modelType = String(c.model_type ?? top.model_type ?? "unknown")
  const hiddenLayers = count(file, c, "num_hidden_layers")
  const topK = count(file, c, "num_experts_per_tok", 0)
  let numExperts: number
  let moeLayers: number[]
  if (c.n_routed_experts !== undefined && c.n_routed_experts !== null) {
    numExperts = count(file, c, "n_routed_experts")
    const firstMoe = count(file, c, "first_k_dense_replace", 0)
    const every = Math.max(1, count(file, c, "moe_layer_freq", 1))
    moeLayers = layers(hiddenLayers, (i) => i >= firstMoe && i % every === 0)
  } else if (c.num_experts !== undefined && c.num_experts !== null) {
    numExperts = count(file, c, "num_experts")
    const step = Math.max(1, count(file, c, "decoder_sparse_step", 1))
    const dense = new Set(Array.isArray(c.mlp_only_layers) ? c.mlp_only_layers : [])
    moeLayers = layers(hiddenLayers, (i) => !dense.has(i) && (i + 1) % step === 0)
  } else if (c.num_local_experts !== undefined && c.num_local_experts !== null) {
    numExperts = count(file, c, "num_local_experts")
    moeLayers = layers(hiddenLayers, () => true)
  } else return undefined
  if (numExperts < 1 || topK < 1 || topK > numExperts || moeLayers.length === 0)
    throw new ModelGeometryError(
      file,
      `not a routing geometry: ${moeLayers.length} MoE layers, top-${topK} of ${numExperts} experts`,
    )
  return { modelType, hiddenLayers, moeLayers, numExperts, topK }
}

/** The geometry of `dir/config.json`; undefined for a dense model or a directory without one. */
export const readModelGeometry = (dir: string): MoeGeometry | undefined => {
  const file = join(dir, "config.json")
  let text: string
  try {
    text = readFileSync(file, "utf8")
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw new ModelGeometryError(file, `cannot read: ${e instanceof Error ? e.message : String(e)}`)
  }
  return parseModelGeometry(text, file)
}
