import { ngrams } from "./ngrams.ts"
import type { TaskTexts } from "./read.ts"

export interface DecontamOptions {
  /** Word n-gram length (default 8). */
  readonly n?: number
  /** An eval task whose overlap exceeds this is contaminated (default 0.5). */
  readonly threshold?: number
}

/** Fraction of a field's n-grams that occur anywhere in the train set (any field). */
export interface FieldOverlaps {
  readonly instruction: number
  readonly solution: number
  readonly tests: number
}

export interface TaskOverlap {
  readonly id: string
  readonly family: string
  /** Fraction of the task's n-grams (all fields together) found anywhere in the train set. */
  readonly overlap: number
  readonly fields: FieldOverlaps
  readonly ngrams: number
  /** The train task sharing the most n-grams, and the fraction it alone covers. */
  readonly nearest: { readonly id: string; readonly overlap: number } | undefined
}

export interface DecontamReport {
  readonly n: number
  readonly threshold: number
  readonly trainTasks: number
  readonly evalTasks: number
  /**
   * Word n-grams found in train tasks of at least 3 train families and at least a quarter of
   * them (with four or more families): scaffold that tasks of many kinds carry (a test runner,
   * shebangs, imports). A copied task's own text is in one family; scaffold says nothing about
   * which task an eval task copies, so no overlap counts it.
   */
  readonly scaffold: number
  readonly max: number
  readonly mean: number
  /** Per eval task, highest overlap first. */
  readonly tasks: ReadonlyArray<TaskOverlap>
  /** Eval task ids above the threshold. */
  readonly flagged: ReadonlyArray<string>
  /** Families that occur in both sets (allowed only with disjoint seeds; see splits.ts). */
  readonly sharedFamilies: ReadonlyArray<string>
  readonly passed: boolean
}

const FIELDS = ["instruction", "solution", "tests"] as const

const fraction = (hit: number, total: number) => (total === 0 ? 0 : hit / total)

/**
 * Word n-gram overlap between each eval task and the whole train set (instructions, solutions
 * and tests; see ngrams.ts for the normalisation). A copied task scores 1.0; unrelated tasks
 * share only boilerplate.
 */
export const decontaminate = (
  train: ReadonlyArray<TaskTexts>,
  evalTasks: ReadonlyArray<TaskTexts>,
  options: DecontamOptions = {},
): DecontamReport => {
  const n = options.n ?? 8
  const threshold = options.threshold ?? 0.5
  // gram -> indices of the train tasks that contain it
  const index = new Map<string, Array<number>>()
  train.forEach((task, i) => {
    const grams = new Set<string>()
    for (const f of FIELDS) for (const g of ngrams(task[f], n)) grams.add(g)
    for (const g of grams) {
      const postings = index.get(g)
      if (postings === undefined) index.set(g, [i])
      else postings.push(i)
    }
  })
  const families = [...new Set(train.map((t) => t.family))]
  const scaffold = new Set<string>()
  if (families.length >= 4)
    for (const [g, postings] of index) {
      const seen = new Set(postings.map((i) => (train[i] as TaskTexts).family))
      if (seen.size >= 3 && seen.size * 4 >= families.length) scaffold.add(g)
    }
  for (const g of scaffold) index.delete(g)
  const tasks: Array<TaskOverlap> = evalTasks.map((task) => {
    const perField = Object.fromEntries(
      FIELDS.map((f) => [f, new Set([...ngrams(task[f], n)].filter((g) => !scaffold.has(g)))]),
    ) as Record<(typeof FIELDS)[number], Set<string>>
    const all = new Set(FIELDS.flatMap((f) => [...perField[f]]))
    const shared = new Map<number, number>()
    let hits = 0
    for (const g of all) {
      const postings = index.get(g)
      if (postings === undefined) continue
      hits++
      for (const i of postings) shared.set(i, (shared.get(i) ?? 0) + 1)
    }
    const fieldOverlap = (f: (typeof FIELDS)[number]) =>
      fraction([...perField[f]].filter((g) => index.has(g)).length, perField[f].size)
    let nearest: TaskOverlap["nearest"]
    for (const [i, count] of shared)
      if (nearest === undefined || count / all.size > nearest.overlap)
        nearest = { id: (train[i] as TaskTexts).id, overlap: fraction(count, all.size) }
    return {
      id: task.id,
      family: task.family,
      overlap: fraction(hits, all.size),
      fields: {
        instruction: fieldOverlap("instruction"),
        solution: fieldOverlap("solution"),
        tests: fieldOverlap("tests"),
      },
      ngrams: all.size,
      nearest,
    }
  })
  tasks.sort((a, b) => b.overlap - a.overlap || (a.id < b.id ? -1 : 1))
  const max = tasks.reduce((m, t) => Math.max(m, t.overlap), 0)
  const mean = fraction(
    tasks.reduce((s, t) => s + t.overlap, 0),
    tasks.length,
  )
  const trainFamilies = new Set(train.map((t) => t.family).filter((f) => f !== ""))
  const sharedFamilies = [
    ...new Set(evalTasks.map((t) => t.family).filter((f) => trainFamilies.has(f))),
  ].sort()
  const flagged = tasks.filter((t) => t.overlap > threshold).map((t) => t.id)
  return {
    n,
    threshold,
    trainTasks: train.length,
    evalTasks: evalTasks.length,
    scaffold: scaffold.size,
    max,
    mean,
    tasks,
    flagged,
    sharedFamilies,
    passed: flagged.length === 0,
  }
}

/** The report as a table for a terminal. */
export const formatReport = (report: DecontamReport): string => {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`.padStart(6)
  const width = Math.max(7, ...report.tasks.map((t) => t.id.length))
  const lines = [
    `${"eval task".padEnd(width)}  overlap  instr.  solut.   tests  nearest train task`,
    ...report.tasks.map(
      (t) =>
        `${t.id.padEnd(width)}  ${pct(t.overlap)}${t.overlap > report.threshold ? "!" : " "} ${pct(t.fields.instruction)}  ${pct(t.fields.solution)}  ${pct(t.fields.tests)}  ${t.nearest === undefined ? "-" : `${t.nearest.id} (${pct(t.nearest.overlap).trim()})`}`,
    ),
    "",
    `${report.evalTasks} eval vs ${report.trainTasks} train tasks, word ${report.n}-grams: max ${pct(report.max).trim()}, mean ${pct(report.mean).trim()}, threshold ${pct(report.threshold).trim()} (${report.scaffold} scaffold n-grams, in 3 train families or more and a quarter of them, not counted)`,
    report.sharedFamilies.length === 0
      ? "families in both sets: none"
      : `families in both sets: ${report.sharedFamilies.join(", ")}`,
    report.passed
      ? "decontaminated: no eval task above the threshold"
      : `CONTAMINATED: ${report.flagged.join(", ")}`,
  ]
  return lines.join("\n")
}
