/**
 * A model's chat template cannot be used: the tokenizer_config.json has none, it does not parse,
 * or rendering it raised (a `raise_exception` call, an undefined operation). Names the file.
 */
export class ChatTemplateError extends Error {
  readonly _tag = "ChatTemplateError"
  constructor(
    /** The tokenizer_config.json (or other source) the template came from. */
    readonly file: string,
    readonly reason: string,
  ) {
    super(`${file}: ${reason}`)
    this.name = "ChatTemplateError"
  }
}
