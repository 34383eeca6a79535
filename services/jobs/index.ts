/** Jobs on the bus: the event stream and the job states every job reader and writer share. */
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
