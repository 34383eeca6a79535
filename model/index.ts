export * from "./tokenizer/index.ts"
