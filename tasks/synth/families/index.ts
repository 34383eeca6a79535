import type { TaskFamily } from "../family.ts"
import { sortByType } from "./sort-by-type.ts"
import { archiveBackup } from "./archive-backup.ts"
import { configEdit } from "./config-edit.ts"
import { csvAggregate } from "./csv-aggregate.ts"
import { csvReshape } from "./csv-reshape.ts"
import { findRename } from "./find-rename.ts"
import { jsonMerge } from "./json-merge.ts"
import { jsonReport } from "./json-report.ts"
import { logReport } from "./log-report.ts"
import { permissionsFix } from "./permissions-fix.ts"
import { scriptTool } from "./script-tool.ts"
import { textSearch } from "./text-search.ts"
import { wordFrequency } from "./word-frequency.ts"

const families: ReadonlyArray<TaskFamily> = [sortByType, archiveBackup, configEdit, csvAggregate, csvReshape, findRename, jsonMerge, jsonReport, logReport, permissionsFix, scriptTool, textSearch, wordFrequency]

/** Every task family, by name. */
export const familyRegistry: Readonly<Record<string, TaskFamily>> = Object.fromEntries(
  families.map((f) => [f.name, f]),
)
