export { type HfTokenizerConfig, parseTokenizerConfig } from "./config.ts"
export { ChatTemplateError } from "./errors.ts"
export {
  JinjaChatTemplate,
  type TemplateMessage,
  type TemplateRenderOptions,
  type TemplateToolCall,
} from "./jinja.ts"
export { type HfModelTokenizer, loadHfModelTokenizer } from "./load.ts"
