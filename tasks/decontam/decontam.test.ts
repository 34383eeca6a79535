import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { FAMILIES, generateTask, type TaskFamily } from "../synth/index.ts"
import {
  checkSplits,
  decontaminate,
  formatReport,
  ngrams,
  readTaskSet,
  SEED_RANGES,
  seedOfId,
  splitFamilies,
  splitSeed,
  type TaskTexts,
  tokenize,
} from "./index.ts"

const family = (name: string) => FAMILIES.find((f) => f.name === name) as TaskFamily

const texts = (
  name: string,
  seed: number,
  difficulty: "easy" | "medium" | "hard" = "medium",
): TaskTexts => {
  const task = generateTask(family(name), seed, 0, difficulty)
  return {
    id: `${name}-${difficulty}-s${seed}-000`,
    dir: "",
    family: name,
    seed,
    instruction: task.instruction,
    solution: task.solution,
    tests: task.tests,
  }
}

const bundled = (split: string) => fileURLToPath(new URL(`../bundled/${split}`, import.meta.url))

describe("n-grams", () => {
  it("lower-cases, splits on punctuation and masks numbers", () => {
    expect(tokenize("Sort `sales.csv` by Revenue: top 3, 2024-05!")).toEqual([
      "sort",
      "sales",
      "csv",
      "by",
      "revenue",
      "top",
      "<num>",
      "<num>",
      "<num>",
    ])
    expect(tokenize("port_8080 = 8080")).toEqual(["port_8080", "<num>"])
  })

  it("keeps a short text as one gram and counts distinct grams", () => {
    expect([...ngrams("just three words", 8)]).toEqual(["just three words"])
    expect(ngrams("", 8).size).toBe(0)
    expect(ngrams("a b c a b c a b", 3)).toEqual(new Set(["a b c", "b c a", "c a b"]))
  })
})

describe("decontaminate", () => {
  const train = ["csv-aggregate", "text-search", "permissions-fix"].flatMap((f) => [
    texts(f, 0),
    texts(f, 1, "hard"),
  ])

  it("catches a train task planted in the eval set (overlap 1.0, nearest = the original)", () => {
    const planted = { ...(train[2] as TaskTexts), id: "planted" }
    const report = decontaminate(train, [texts("log-report", 1_000_000), planted], {
      threshold: 0.5,
    })
    expect(report.tasks[0]).toMatchObject({
      id: "planted",
      overlap: 1,
      nearest: { id: train[2]?.id, overlap: 1 },
    })
    expect(report.tasks[0]?.fields).toEqual({ instruction: 1, solution: 1, tests: 1 })
    expect(report.flagged).toEqual(["planted"])
    expect(report.passed).toBe(false)
    expect(report.max).toBe(1)
    expect(formatReport(report)).toContain("CONTAMINATED: planted")
  })

  it("sees through changed numbers: a copy with other numbers still overlaps 1.0", () => {
    const original = train[0] as TaskTexts
    const renumbered = {
      ...original,
      id: "renumbered",
      instruction: original.instruction.replace(/\d+/g, (d) => String(Number(d) + 7)),
      tests: original.tests.replace(/\d+/g, (d) => String(Number(d) * 3)),
    }
    expect(decontaminate(train, [renumbered]).max).toBe(1)
  })

  it("rates a held-out family low and a held-out seed of a train family high", () => {
    const report = decontaminate(train, [
      texts("json-merge", 1_000_000),
      texts("csv-aggregate", 1_000_000),
    ])
    const byId = Object.fromEntries(report.tasks.map((t) => [t.id, t.overlap]))
    expect(byId["json-merge-medium-s1000000-000"]).toBeLessThan(0.15)
    expect(byId["csv-aggregate-medium-s1000000-000"]).toBeGreaterThan(0.5)
    expect(report.sharedFamilies).toEqual(["csv-aggregate"])
  })

  it("does not count scaffold found in 3 train families and a quarter of them, and only with four or more", () => {
    const runner =
      "for t in tests do run the test in a subshell and write its status to the report file now done"
    const withRunner = (t: TaskTexts): TaskTexts => ({ ...t, tests: `${t.tests}\n${runner}` })
    const held = withRunner(texts("json-merge", 1_000_000))
    const eight = [
      "csv-aggregate",
      "text-search",
      "permissions-fix",
      "log-report",
      "archive-backup",
      "config-edit",
      "find-rename",
      "word-frequency",
    ]
    const trainWith = (k: number, names = eight) =>
      names.map((f, i) => (i < k ? withRunner(texts(f, 0)) : texts(f, 0)))
    const plain = decontaminate(trainWith(0), [texts("json-merge", 1_000_000)])
    // In three of eight families: scaffold, so the held-out family's overlap is what it was.
    const report = decontaminate(trainWith(3), [held])
    expect(report.scaffold).toBeGreaterThanOrEqual(plain.scaffold + ngrams(runner, 8).size)
    expect(report.max).toBeCloseTo(plain.max, 6)
    // In two: not scaffold, so it counts as overlap.
    const twice = decontaminate(trainWith(2), [held])
    expect(twice.scaffold).toBe(plain.scaffold)
    expect(twice.max).toBeGreaterThan(plain.max + 0.02)
    // Three families are too few to tell scaffold from a copied template.
    const three = decontaminate(trainWith(3, eight.slice(0, 3)), [held])
    expect(three.scaffold).toBe(0)
    expect(formatReport(report)).toContain("scaffold n-grams")
  })

  it("passes on the bundled splits", async () => {
    const trainSet = await Effect.runPromise(readTaskSet([bundled("train")]))
    const evalSet = await Effect.runPromise(readTaskSet([bundled("eval")]))
    expect(trainSet.length).toBe(24)
    expect(evalSet.length).toBe(8)
    const report = decontaminate(trainSet, evalSet, { n: 8, threshold: 0.5 })
    expect(report.passed).toBe(true)
    expect(report.max).toBeLessThan(0.2)
    expect(report.sharedFamilies).toEqual([])
    expect(checkSplits(trainSet, evalSet).violations).toEqual([])
  })

  it("reads a planted duplicate from disk and flags it", async () => {
    const trainSet = await Effect.runPromise(readTaskSet([bundled("train")]))
    const evalSet = await Effect.runPromise(
      readTaskSet([bundled("eval"), `${bundled("train")}/csv-aggregate-easy-s0-000`]),
    )
    const report = decontaminate(trainSet, evalSet)
    expect(report.flagged).toEqual(["csv-aggregate-easy-s0-000"])
    expect(checkSplits(trainSet, evalSet).violations.join("\n")).toContain(
      "csv-aggregate-easy-s0-000 is in both sets",
    )
  })
})

describe("splits", () => {
  const names = FAMILIES.map((f) => f.name)

  it("holds out whole families, deterministically per seed", () => {
    const a = splitFamilies(names, { seed: 3, heldOut: 3 })
    expect(splitFamilies([...names].reverse(), { seed: 3, heldOut: 3 })).toEqual(a)
    expect(a.heldOutFamilies.length).toBe(3)
    expect([...a.heldOutFamilies, ...a.trainFamilies].sort()).toEqual([...names].sort())
    expect(a.heldOutFamilies.filter((f) => a.trainFamilies.includes(f))).toEqual([])
    expect(splitFamilies(names, { seed: 4, heldOut: 3 }).heldOutFamilies).not.toEqual(
      a.heldOutFamilies,
    )
    expect(() => splitFamilies(names, { seed: 1, heldOut: names.length })).toThrow(RangeError)
  })

  it("draws train and eval seeds from disjoint ranges", () => {
    expect(SEED_RANGES.train.to).toBeLessThanOrEqual(SEED_RANGES.eval.from)
    expect(splitSeed("train", 0)).toBe(0)
    expect(splitSeed("eval", 2)).toBe(1_000_002)
    expect(() => splitSeed("train", 1_000_000)).toThrow(RangeError)
    expect(seedOfId("csv-aggregate-hard-s1000002-000")).toBe(1_000_002)
    expect(seedOfId("hand-written")).toBeUndefined()
  })

  it("accepts a shared family only with held-out seeds", () => {
    const ok = checkSplits(
      [texts("csv-aggregate", 3)],
      [texts("csv-aggregate", 1_000_003), texts("json-merge", 1_000_000)],
    )
    expect(ok).toEqual({
      heldOutFamilies: ["json-merge"],
      sharedFamilies: ["csv-aggregate"],
      violations: [],
    })
    const leaked = checkSplits([texts("csv-aggregate", 3)], [texts("csv-aggregate", 4)])
    expect(leaked.violations).toHaveLength(1)
    expect(leaked.violations[0]).toContain("not in the eval range")
  })
})
