export { type HfTokenizerConfig, parseTokenizerConfig } from "./config.ts"
export { TemplateConversation, type TemplateConversationOptions } from "./conversation.ts"
export { ChatTemplateError } from "./errors.ts"
export { HfChatFormat } from "./format.ts"
export {
  ModelGeometryError,
  type MoeGeometry,
  parseModelGeometry,
  readModelGeometry,
} from "./geometry.ts"
export {
  JinjaChatTemplate,
  type TemplateMessage,
  type TemplateRenderOptions,
  type TemplateToolCall,
} from "./jinja.ts"
export { type HfModelTokenizer, loadHfModelTokenizer } from "./load.ts"
