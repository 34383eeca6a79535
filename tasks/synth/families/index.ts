import type { TaskFamily } from "../family.ts"
import { archiveBackup } from "./archive-backup.ts"
import { checksumAudit } from "./checksum-audit.ts"
import { configEdit } from "./config-edit.ts"
import { csvAggregate } from "./csv-aggregate.ts"
import { csvReshape } from "./csv-reshape.ts"
import { findRename } from "./find-rename.ts"
import { jsonMerge } from "./json-merge.ts"
import { jsonReport } from "./json-report.ts"
import { LADDER_FAMILIES } from "./ladder.ts"
import { LADDER_OBSERVE_FAMILIES } from "./ladder-observe.ts"
import { logReport } from "./log-report.ts"
import { permissionsFix } from "./permissions-fix.ts"
import { releasePipeline } from "./release-pipeline.ts"
import { scriptTool } from "./script-tool.ts"
import { sortByType } from "./sort-by-type.ts"
import { textSearch } from "./text-search.ts"
import { wordFrequency } from "./word-frequency.ts"

/**
 * The multi-step families, one small module each: the bundled corpus (tasks/bundled) and its
 * tokenizer are built from exactly these, so the ladder's families are kept apart from them.
 */
export const FAMILIES: ReadonlyArray<TaskFamily> = [
  archiveBackup,
  checksumAudit,
  configEdit,
  csvAggregate,
  csvReshape,
  findRename,
  jsonMerge,
  jsonReport,
  logReport,
  permissionsFix,
  releasePipeline,
  scriptTool,
  sortByType,
  textSearch,
  wordFrequency,
]

export { LADDER_FAMILIES, LADDER_RUNG_1, LADDER_RUNG_2, LADDER_RUNG_3 } from "./ladder.ts"
export {
  LADDER_OBSERVE_FAMILIES,
  LADDER_RUNG_5,
  LADDER_RUNG_6,
  LADDER_RUNG_7,
  OBSERVE_RUNG_COMMANDS,
  OBSERVE_RUNGS,
  OBSERVE_TAG,
  type ObserveRung,
} from "./ladder-observe.ts"

/**
 * The multi-step families, the ladder's one-, two- and three-command families, then its
 * observation families.
 */
export const ALL_FAMILIES: ReadonlyArray<TaskFamily> = [
  ...FAMILIES,
  ...LADDER_FAMILIES,
  ...LADDER_OBSERVE_FAMILIES,
]

/** Every task family, by name; the synthesiser finds them here. */
export const familyRegistry: Readonly<Record<string, TaskFamily>> = Object.fromEntries(
  ALL_FAMILIES.map((f) => [f.name, f]),
)
