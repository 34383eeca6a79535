export type { ActorSpec, Delivery, Mailbox, RunOptions } from "./actor.ts"
export { protobufDecoder } from "./decode.ts"
export { MalformedMessage } from "./errors.ts"
export { ERROR_HEADER, runActor } from "./runtime.ts"
