/** Jobs on the bus: the job store, the event stream and the job states every reader shares. */
export {
  InvalidArgument,
  JobAlreadyExists,
  JobContended,
  JobCorrupt,
  JobNotFound,
  JobTerminal,
  stateName,
  type Violation,
} from "./errors.ts"
export {
  allJobEvents,
  EVENT_DUPLICATE_WINDOW_MS,
  ensureJobEventsStream,
  isCancelRequested,
  isTerminalEvent,
  isTerminalState,
  jobEventMsgId,
  jobEventsStream,
  laterSeq,
  TERMINAL_STATES,
} from "./events.ts"
export { DEFAULT_EPISODE_LIMITS, type EpisodeLimits, episodeLimitsOf } from "./limits.ts"
export {
  criticWarmupStepsOf,
  DEFAULT_BATCH_TRAJECTORIES,
  DEFAULT_CRITIC_WARMUP_STEPS,
  DEFAULT_MAX_STALENESS,
  type JobSchedule,
  jobSchedule,
  learnerStepBudget,
  orDefault,
} from "./schedule.ts"
export {
  appendJobEvent,
  DEFAULT_PAGE_SIZE,
  type ErrorDetailInit,
  JOB_ID_PATTERN,
  type JobChange,
  type JobEventInit,
  type JobEventPayload,
  type JobPage,
  JobStore,
  type JobStoreError,
  type JobStoreShape,
  jobStoreFor,
  jobStoreLayer,
  MAX_PAGE_SIZE,
  makeJobStore,
  newJobId,
  STATUS_SETTLE_MS,
  type StoredJob,
} from "./store.ts"
