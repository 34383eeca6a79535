export { BYTE_TO_UNICODE } from "./byteLevel.ts"
export {
  type ChatMessage,
  type ChatRole,
  type ChatSegment,
  type ChatSegmentKind,
  ChatTemplate,
  type RenderedChat,
  type RenderOptions,
  renderChat,
} from "./chat.ts"
export type { ChatFormat, ConversationOptions, EpisodeConversation } from "./chat-format.ts"
export { Conversation } from "./conversation.ts"
export { TokenizerFormatError, TokenizerTrainingError, UnknownTokenError } from "./errors.ts"
export { loadTokenizerJson, saveTokenizerJson, toTokenizerJson } from "./huggingFace.ts"
export { GPT2_PATTERN } from "./pretokenize.ts"
export { type EncodeOptions, Tokenizer, type TokenizerSpec } from "./tokenizer.ts"
export { CHAT_SPECIAL_TOKENS, type TrainOptions, trainTokenizer } from "./train.ts"
