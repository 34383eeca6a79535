/** A tokenizer.json (or tokenizer settings) this module cannot represent faithfully. */
export class TokenizerFormatError extends Error {
  readonly _tag = "TokenizerFormatError"
  constructor(message: string) {
    super(message)
    this.name = "TokenizerFormatError"
  }
}

/** A token id or special-token name that is not in the vocabulary. */
export class UnknownTokenError extends Error {
  readonly _tag = "UnknownTokenError"
  constructor(readonly token: string | number) {
    super(`unknown token: ${String(token)}`)
    this.name = "UnknownTokenError"
  }
}

/** Invalid training settings (vocabulary too small for bytes + special tokens, and so on). */
export class TokenizerTrainingError extends Error {
  readonly _tag = "TokenizerTrainingError"
  constructor(message: string) {
    super(message)
    this.name = "TokenizerTrainingError"
  }
}
