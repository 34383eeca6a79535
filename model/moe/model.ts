import type { Floats, Kernels } from "../kernels/kernels.ts"
import { referenceKernels } from "../kernels/reference.ts"
import { loadBalancingLoss } from "./aux.ts"
import { type BackwardOptions, backward } from "./backward.ts"
import { KvCache } from "./cache.ts"
import { DEFAULT_CONFIG, headDim, type TinyMoeConfig, validateConfig } from "./config.ts"
import {
  type ForwardOptions,
  type ForwardResult,
  forwardRows,
  type Row,
  type Tape,
} from "./forward.ts"
import { initParams, type ParamEntry, type Params, type Precision, paramEntries } from "./params.ts"
import { Rope } from "./rope.ts"
import type { Routing } from "./routing.ts"
import type { ModelState } from "./state.ts"

export interface CreateOptions {
  readonly config?: Partial<TinyMoeConfig>
  readonly seed?: number
  readonly precision?: Precision
  readonly kernels?: Kernels
}

/**
 * The TinyMoE policy and critic. Sampling and training run the same forward code: the sampler
 * pushes rows through KV caches and records expert choices, the learner re-scores whole
 * sequences with a tape, with those choices replayed (R3) or recomputed, and back-propagates.
 */
export class TinyMoe implements ModelState {
  readonly rope: Rope

  private constructor(
    readonly config: TinyMoeConfig,
    readonly params: Params,
    readonly kernels: Kernels,
    readonly precision: Precision,
  ) {
    this.rope = new Rope(headDim(config), config.ropeTheta, config.maxSeqLen)
  }

  static create(options: CreateOptions = {}): TinyMoe {
    const config = { ...DEFAULT_CONFIG, ...options.config }
    const error = validateConfig(config)
    if (error) throw error
    const precision = options.precision ?? "f32"
    return new TinyMoe(
      config,
      initParams(config, options.seed ?? 0, precision),
      options.kernels ?? referenceKernels,
      precision,
    )
  }

  /** Wraps existing weights (loaded from safetensors, or shared with another kernel backend). */
  static fromParams(
    config: TinyMoeConfig,
    params: Params,
    precision: Precision,
    kernels: Kernels = referenceKernels,
  ): TinyMoe {
    const error = validateConfig(config)
    if (error) throw error
    return new TinyMoe(config, params, kernels, precision)
  }

  /** The same weights run through other kernels. */
  withKernels(kernels: Kernels): TinyMoe {
    return new TinyMoe(this.config, this.params, kernels, this.precision)
  }

  entries(): ParamEntry[] {
    return paramEntries(this.config, this.params)
  }

  newCache(capacity: number = this.config.maxSeqLen): KvCache {
    return new KvCache(this.config, this.precision, Math.min(capacity, this.config.maxSeqLen))
  }

  /** Prefill, batched decode: see `forwardRows`. */
  forward(rows: ReadonlyArray<Row>, options?: ForwardOptions): ForwardResult {
    return forwardRows(this, rows, options)
  }

  /**
   * Training forward over a whole sequence from position 0, keeping activations for `backward`.
   * With `replay`, expert choices come from the sampler's record instead of the router.
   */
  score(
    ids: ArrayLike<number>,
    options: { replay?: Routing; tape?: boolean } = {},
  ): ForwardResult & { cache: KvCache } {
    const cache = this.newCache(ids.length)
    const rows: Row[] = Array.from({ length: ids.length }, (_, i) => ({
      cache,
      token: ids[i] as number,
    }))
    const result = forwardRows(this, rows, {
      tape: options.tape ?? true,
      ...(options.replay ? { replay: options.replay } : {}),
    })
    return { ...result, cache }
  }

  backward(tape: Tape, dLogits: Floats, dValues?: Float64Array, options?: BackwardOptions): Params {
    return backward(this, tape, dLogits, dValues, options)
  }

  /** Load-balancing loss summed over layers, for a taped pass. */
  auxLoss(tape: Tape): number {
    const c = this.config
    return tape.layers.reduce(
      (sum, layer) =>
        layer.moe
          ? sum +
            loadBalancingLoss(
              layer.routerLogits,
              layer.experts,
              tape.rows.length,
              c.nExperts,
              c.topK,
            ).loss
          : sum,
      0,
    )
  }
}
