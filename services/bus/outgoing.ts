import { Effect } from "effect"
import type { Headers } from "./bus.ts"
import { InvalidSubject, PayloadTooLarge } from "./errors.ts"
import { wireSize } from "./size.ts"
import { subjectProblem } from "./subjects.ts"

/** Checks both adapters make before a message leaves: a valid subject, within max_payload. */
export const checkOutgoing = (
  maxPayload: number,
  subject: string,
  data: Uint8Array,
  headers?: Headers,
): Effect.Effect<void, PayloadTooLarge | InvalidSubject> =>
  Effect.suspend((): Effect.Effect<void, PayloadTooLarge | InvalidSubject> => {
    const problem = subjectProblem(subject, false)
    if (problem !== undefined) return Effect.fail(new InvalidSubject({ subject, reason: problem }))
    const bytes = wireSize(data, headers)
    return bytes > maxPayload
      ? Effect.fail(new PayloadTooLarge({ subject, bytes, maxPayload }))
      : Effect.void
  })
