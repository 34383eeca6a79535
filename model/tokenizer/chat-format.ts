import type { ChatMessage } from "./chat.ts"
import type { Tokenizer } from "./tokenizer.ts"

/**
 * One episode's conversation as a chat template lays it out, built turn by turn in the TITO
 * discipline: the sampler appends what it returns as ids and never re-tokenises. The policy's
 * sampled ids are kept verbatim; the conversation only supplies the ids around them (prompt,
 * turn glue, observation turns) and counts drift — places where rendering the finished
 * conversation from text would give other ids than the ones the episode holds.
 */
export interface EpisodeConversation {
  /** Ids that end an assistant turn (the template's end-of-turn or end-of-sequence token). */
  readonly stopIds: ReadonlyArray<number>
  /** System and user turns and the header the policy continues from. */
  prompt(system: string, user: string): Uint32Array
  /**
   * Records the assistant turn sampled from position `start` and returns its content (without a
   * final stop id) and the glue that closes the turn (loss mask 0): what the template puts after
   * the content that the policy did not sample itself.
   */
  closeAssistant(start: number, sampled: Uint32Array): { glue: Uint32Array; content: Uint32Array }
  /**
   * The observation turn whose content ids (already capped) start after this turn's opening,
   * and the header of the next assistant turn: the ids to append, loss mask 0. `raw` is the
   * observation's bytes before capping.
   */
  observation(start: number, content: Uint32Array, raw: Uint8Array): Uint32Array
  /** Drift events so far (never in the loss region: the sampled ids are kept). */
  driftEvents(): number
  /** The conversation as messages (for re-rendering from text, as a text-based trainer would). */
  messages(): ChatMessage[]
}

/** How an episode's action format meets the template. */
export interface ConversationOptions {
  /** Tool definitions, for templates that describe tools (their `tools` variable). */
  readonly tools?: ReadonlyArray<unknown>
  /** The role observations take: "tool" for tool calls, "user" otherwise (default). */
  readonly observationRole?: "tool" | "user"
}

/** What the sampler needs of a chat template: its tokenizer, content encoding, conversations. */
export interface ChatFormat {
  readonly tokenizer: Tokenizer
  /** A name for logs and errors: the bundled template, or the model's tokenizer_config.json. */
  readonly name: string
  /** Message content as ids, special-token text encoded as plain text (nothing can forge them). */
  content(content: string | Uint8Array): Uint32Array
  /** A fresh conversation for one episode. */
  conversation(options?: ConversationOptions): EpisodeConversation
}
