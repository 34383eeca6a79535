/**
 * Action formats: how the sampler reads the policy's reply as shell work, and how it writes a
 * reference solution as turns of that reply format (for golden and oracle transcripts).
 */

export interface ShellCommand {
  /**
   * What to send to the shell. shell-block: a script run as one unit (no trailing newline needed).
   * terminus-json: literal keystrokes, usually ending with "\n"; tmux key names such as `C-c` are
   * already turned into their bytes ("\u0003").
   */
  readonly keystrokes: string
  /** Seconds to wait, Terminus "duration"; undefined = run to completion. */
  readonly durationSec?: number
}

export type ParsedAction =
  | {
      readonly kind: "commands"
      /** Run in order. May be empty (terminus-json: the agent only waits for more output). */
      readonly commands: ReadonlyArray<ShellCommand>
      /** Run the commands, then the episode completes. */
      readonly taskComplete: boolean
      readonly analysis?: string
      readonly plan?: string
      /** Tolerated problems (extra text, unknown fields); worth showing with the next observation. */
      readonly warnings?: ReadonlyArray<string>
    }
  /** The agent declares completion with no commands. */
  | { readonly kind: "complete"; readonly warnings?: ReadonlyArray<string> }
  /** Nothing is run; `feedback` is the text to send back to the agent as the observation. */
  | { readonly kind: "malformed"; readonly reason: string; readonly feedback: string }

export type ActionFormatName = "shell-block" | "shell-block-short" | "terminus-json" | "tool-call"

export interface ActionFormat {
  readonly name: ActionFormatName
  /** Instructions appended to the system prompt telling the agent how to act. */
  readonly systemPrompt: string
  /** Never throws: any text is one of the three kinds. */
  parse(text: string): ParsedAction
  /**
   * Renders a reference solution script as agent turns in this format (for golden/oracle
   * transcripts): one string per turn; the last turn completes the task. See solution.ts for how
   * a script is cut into turns.
   */
  renderSolution(script: string): ReadonlyArray<string>
  /** Tool definitions for chat templates that describe tools (their `tools` variable). */
  readonly tools?: ReadonlyArray<unknown>
  /** The role observations take in the chat: "tool" for tool calls, "user" otherwise (default). */
  readonly observationRole?: "tool" | "user"
}
