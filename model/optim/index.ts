export {
  AdamW,
  type AdamWOptions,
  type AdamWParam,
  type AdamWState,
  decodeAdamWState,
  encodeAdamWState,
} from "./adamw.ts"
export { OptimizerError } from "./errors.ts"
export { type LrScheduleOptions, lrSchedule } from "./schedule.ts"
