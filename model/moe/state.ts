import type { Kernels } from "../kernels/kernels.ts"
import type { TinyMoeConfig } from "./config.ts"
import type { Params, Precision } from "./params.ts"
import type { Rope } from "./rope.ts"

/** What a forward or backward pass reads: shapes, weights, the kernels to run them with. */
export interface ModelState {
  readonly config: TinyMoeConfig
  readonly params: Params
  readonly kernels: Kernels
  readonly rope: Rope
  readonly precision: Precision
}
