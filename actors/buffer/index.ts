export { type BufferOptions, runBuffer } from "./actor.ts"
export { AssembledTrajectory, TrajectoryAssembler, TrajectoryCorrupt } from "./assemble.ts"
export {
  BufferClientError,
  resolveBatch,
  type TakeBatchOptions,
  type TakeBatchParams,
  takeBatch,
} from "./client.ts"
// The surface other folders use.
export { collectTrajectories } from "./collect.ts"
export { runBufferPool } from "./job-pool.ts"
export { type BufferMetrics, bufferMetrics, type DropReason } from "./metrics.ts"
export { type BufferNames, bufferNames } from "./names.ts"
export { type StalePolicy, stalenessOf } from "./ready-pool.ts"
