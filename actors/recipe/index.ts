export {
  copyModel,
  type EvaluateOptions,
  LADDER_RECIPE_DEFAULTS,
  type LadderRecipe,
  type LadderRecipeOptions,
  meanResolvedTurns,
  OBSERVE_RECIPE_DEFAULTS,
  openLadderRecipe,
  type RecipeScore,
  type RecipeTask,
  type RlHooks,
  type RlResult,
  recipeDefaultsFor,
  recipeLimits,
  resolvedRate,
  scoreTrajectories,
  sftUpdates,
  type WarmStart,
} from "./ladder.ts"
// The surface other folders use.
export { recipeTaskSets } from "./task-sets.ts"
export { RlTimeBudget } from "./time-budget.ts"
