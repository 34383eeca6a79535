/**
 * Golden transcripts for the SFT warm start: tasks' reference solutions (cut into turns by
 * tasks/solution) played by the oracle agent through the real episode loop.
 */
export { type GoldenError, type GoldenToWireError, goldenTrajectories } from "./golden.ts"
