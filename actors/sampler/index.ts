/** The sampler folder's surface: what other folders may import. */
export {
  ACTION_FORMAT_NAMES,
  ACTION_FORMATS,
  type ActionFormat,
  DONE_TOKEN,
  isActionFormatName,
  parseShellBlock,
  SHELL_BLOCK_PROMPT,
  shellBlock,
  shellBlockShort,
} from "./actions/index.ts"
export { runSampler } from "./actor.ts"
export { runEpisodeBatch } from "./batch.ts"
export { type EpisodeInfraError, episodeSystemPrompt } from "./episode.ts"
export { runEpisodeHere } from "./in-process.ts"
export { type EmbeddedPolicy, embeddedPolicy } from "./policy/embedded.ts"
export { jobPolicies } from "./policy/job-policies.ts"
export { scriptedPolicy } from "./policy/scripted.ts"
export {
  type ChunkIdentity,
  chunkMsgId,
  chunkRecord,
  encodeRecord,
  endMsgId,
  endRecord,
  maxChunkTokens,
  publishChunk,
  splitSpan,
} from "./records.ts"
export type { ChunkSpan } from "./tito.ts"
