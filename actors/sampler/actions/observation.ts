/**
 * What the agent sees after a command: the output's raw bytes (they may not be UTF-8, so they are
 * cut as bytes and never decoded), cut to a budget by keeping the head and the tail, and a status
 * line.
 *
 * Layout: `<output>[\n]<status lines>\n`, where the `\n` is added only when the output does not
 * already end with one, and the status lines are, in order:
 * - `[output truncated: N bytes omitted]` when bytes were dropped before (truncatedBytes > 0);
 * - `[timed out after the command's limit; interrupted with Ctrl-C]` when it timed out, else
 *   `[exit code N]` when the exit code is known (for keystrokes sent with a duration it is not:
 *   then there is no status line).
 * Over the budget, the output's middle gives way to `\n[... N bytes omitted ...]\n`, half the kept
 * bytes before and half after; the whole observation, marker and status included, is at most
 * maxBytes (maxBytes below MIN_OBSERVATION_BYTES counts as MIN_OBSERVATION_BYTES).
 */

import { concatBytes } from "../../../services/packed/index.ts"

export interface CommandOutcome {
  readonly output: Uint8Array
  readonly exitCode: number | undefined
  readonly timedOut: boolean
  /** Bytes already dropped from `output` before it got here (say by the sandbox's cap). */
  readonly truncatedBytes?: number
}

export interface ObservationOptions {
  readonly maxBytes: number
}

export interface Observation {
  readonly bytes: Uint8Array
  /** Some of the command's output is missing: cut here, or before (truncatedBytes > 0). */
  readonly truncated: boolean
}

/** The smallest budget honoured: room for the marker, the status lines and some output. */
export const MIN_OBSERVATION_BYTES = 256

export const TIMED_OUT_STATUS = "[timed out after the command's limit; interrupted with Ctrl-C]"

export const omittedMarker = (bytes: number): string => `\n[... ${bytes} bytes omitted ...]\n`

const encoder = new TextEncoder()

const statusLines = (outcome: CommandOutcome): Array<string> => {
  const lines: Array<string> = []
  const dropped = outcome.truncatedBytes ?? 0
  if (dropped > 0) lines.push(`[output truncated: ${dropped} bytes omitted]`)
  if (outcome.timedOut) lines.push(TIMED_OUT_STATUS)
  else if (outcome.exitCode !== undefined) lines.push(`[exit code ${outcome.exitCode}]`)
  return lines
}

const NEWLINE = new Uint8Array([0x0a])
const EMPTY = new Uint8Array(0)

export const formatObservation = (
  outcome: CommandOutcome,
  options: ObservationOptions,
): Observation => {
  const limit = Math.max(Math.floor(options.maxBytes), MIN_OBSERVATION_BYTES)
  const lines = statusLines(outcome)
  const status = lines.length > 0 ? encoder.encode(`${lines.join("\n")}\n`) : EMPTY
  const output = outcome.output
  const upstream = (outcome.truncatedBytes ?? 0) > 0
  const separator = (body: Uint8Array) =>
    status.length > 0 && body.length > 0 && body[body.length - 1] !== 0x0a ? NEWLINE : EMPTY

  const whole = output.length + separator(output).length + status.length
  if (whole <= limit) {
    return { bytes: concatBytes([output, separator(output), status]), truncated: upstream }
  }
  // The marker for the most that could be dropped is the longest it can be.
  const room = limit - status.length - 1 - encoder.encode(omittedMarker(output.length)).length
  const kept = Math.max(0, Math.min(room, output.length))
  const headLength = Math.floor(kept / 2)
  const head = output.subarray(0, headLength)
  const tail = output.subarray(output.length - (kept - headLength))
  const marker = encoder.encode(omittedMarker(output.length - kept))
  return { bytes: concatBytes([head, marker, tail, separator(tail), status]), truncated: true }
}

/** The observation for a reply that could not be used: the format's feedback. */
export const malformedObservation = (feedback: string): Uint8Array =>
  encoder.encode(feedback.endsWith("\n") ? feedback : `${feedback}\n`)

/** Puts the warnings about the agent's last reply before its observation. */
export const prependWarnings = (
  observation: Uint8Array,
  warnings: ReadonlyArray<string> | undefined,
): Uint8Array => {
  if (warnings === undefined || warnings.length === 0) return observation
  const note = `Warnings about your previous reply:\n${warnings.map((w) => `- ${w}`).join("\n")}\n\n`
  return concatBytes([encoder.encode(note), observation])
}
