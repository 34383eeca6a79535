/** Reference solution scripts cut into agent turns (golden and oracle transcripts). */

export { statementBoundaries, Unsupported } from "./lexer.ts"
export {
  MAX_SOLUTION_STEPS,
  planSolution,
  SOLUTION_FILE,
  type SolutionPlan,
  solutionCommands,
  wholeScriptCommand,
} from "./plan.ts"
