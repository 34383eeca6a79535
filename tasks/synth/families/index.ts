import type { TaskFamily } from "../family.ts"
import { archiveBackup } from "./archive-backup.ts"
import { checksumAudit } from "./checksum-audit.ts"
import { configEdit } from "./config-edit.ts"
import { csvAggregate } from "./csv-aggregate.ts"
import { csvReshape } from "./csv-reshape.ts"
import { findRename } from "./find-rename.ts"
import { jsonMerge } from "./json-merge.ts"
import { jsonReport } from "./json-report.ts"
import { logReport } from "./log-report.ts"
import { permissionsFix } from "./permissions-fix.ts"
import { releasePipeline } from "./release-pipeline.ts"
import { scriptTool } from "./script-tool.ts"
import { sortByType } from "./sort-by-type.ts"
import { textSearch } from "./text-search.ts"
import { wordFrequency } from "./word-frequency.ts"

/** The families, one small module each; the synthesiser finds them by name. */
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

/** Every task family, by name. */
export const familyRegistry: Readonly<Record<string, TaskFamily>> = Object.fromEntries(
  FAMILIES.map((f) => [f.name, f]),
)
