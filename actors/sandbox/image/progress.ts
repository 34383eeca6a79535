import { createInterface } from "node:readline"
import { Readable } from "node:stream"
import { Data, Effect, Stream } from "effect"

/** One message of the engine's JSON progress stream (build, import, pull). */
export interface ProgressMessage {
  readonly stream?: string
  readonly status?: string
  readonly progress?: string
  readonly error?: string
  readonly errorDetail?: { readonly message?: string; readonly code?: number }
  readonly aux?: unknown
}

export class ProgressStreamFailed extends Data.TaggedError("ProgressStreamFailed")<{
  readonly reason: string
}> {}

const parse = (line: string): ProgressMessage => {
  try {
    const value: unknown = JSON.parse(line)
    return typeof value === "object" && value !== null ? (value as ProgressMessage) : {}
  } catch {
    // Not JSON: keep it as text so that nothing the engine said is lost.
    return { stream: `${line}\n` }
  }
}

/** The messages of a newline-delimited JSON stream, as they arrive. */
export const progressMessages = (
  stream: NodeJS.ReadableStream,
): Stream.Stream<ProgressMessage, ProgressStreamFailed> => {
  const input = stream instanceof Readable ? stream : Readable.from(stream)
  return Stream.fromAsyncIterable(
    createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY }),
    (error) => new ProgressStreamFailed({ reason: String(error) }),
  ).pipe(
    Stream.filter((line) => line.trim() !== ""),
    Stream.map(parse),
  )
}

/** The message's error, if it reports one. */
export const errorOf = (message: ProgressMessage): string | undefined =>
  message.errorDetail?.message ?? message.error

/** Follows a stream to its end, each line of text to `onLine`; fails on the first error. */
export const followProgress = (
  stream: NodeJS.ReadableStream,
  onLine: (line: string) => Effect.Effect<void>,
): Effect.Effect<void, ProgressStreamFailed> =>
  Stream.runForEach(progressMessages(stream), (message) => {
    const error = errorOf(message)
    if (error !== undefined) return Effect.fail(new ProgressStreamFailed({ reason: error }))
    const text = (message.stream ?? message.status ?? "").trimEnd()
    return text === "" ? Effect.void : onLine(text)
  })
