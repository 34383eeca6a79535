import { Data, Effect } from "effect"
import type { ActionFormat, ActionFormatName } from "./format.ts"
import { shellBlock, shellBlockShort } from "./shell-block.ts"
import { terminusJson } from "./terminus-json.ts"
import { toolCall } from "./tool-call.ts"

export type { ActionFormat, ActionFormatName, ParsedAction, ShellCommand } from "./format.ts"
export {
  type CommandOutcome,
  formatObservation,
  MIN_OBSERVATION_BYTES,
  malformedObservation,
  type Observation,
  type ObservationOptions,
  omittedMarker,
  prependWarnings,
  TIMED_OUT_STATUS,
} from "./observation.ts"
export {
  DONE_TOKEN,
  parseShellBlock,
  SHELL_BLOCK_PROMPT,
  SHELL_BLOCK_SHORT_PROMPT,
  shellBlock,
  shellBlockShort,
} from "./shell-block.ts"
export {
  DEFAULT_DURATION_SEC,
  SOLUTION_DURATION_SEC,
  TERMINUS_JSON_PROMPT,
  terminusJson,
  tmuxKey,
  translateKeystrokes,
} from "./terminus-json.ts"
export {
  parseToolCalls,
  renderToolCallSolution,
  TOOL_CALL_PROMPT,
  TOOL_CALL_TOOLS,
  toolCall,
} from "./tool-call.ts"

/** Every action format, by name. */
export const ACTION_FORMATS: { readonly [N in ActionFormatName]: ActionFormat } = {
  "shell-block": shellBlock,
  "shell-block-short": shellBlockShort,
  "terminus-json": terminusJson,
  "tool-call": toolCall,
}

export const ACTION_FORMAT_NAMES = Object.keys(ACTION_FORMATS) as ReadonlyArray<ActionFormatName>

export class UnknownActionFormat extends Data.TaggedError("UnknownActionFormat")<{
  readonly name: string
  readonly valid: ReadonlyArray<string>
}> {
  override get message(): string {
    return `unknown action format ${JSON.stringify(this.name)}; valid: ${this.valid.join(", ")}`
  }
}

export const isActionFormatName = (name: string): name is ActionFormatName =>
  Object.hasOwn(ACTION_FORMATS, name)

/** The format called `name`, or UnknownActionFormat naming the valid choices. */
export const actionFormat = (name: string): Effect.Effect<ActionFormat, UnknownActionFormat> =>
  isActionFormatName(name)
    ? Effect.succeed(ACTION_FORMATS[name])
    : Effect.fail(new UnknownActionFormat({ name, valid: ACTION_FORMAT_NAMES }))
