import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { checkSplits, decontaminate, readTaskSet } from "../decontam/index.ts"
import { loadTasks } from "../load/index.ts"
import { solutionCommands } from "../solution/index.ts"
import {
  DIFFICULTIES,
  evalPair,
  FAMILIES,
  familyRegistry,
  generateTask,
  inPool,
  LADDER_DIGITS,
  LADDER_EXT,
  LADDER_FAMILIES,
  LADDER_TRAP_EXT,
  LADDER_WORDS,
  ladderPytest,
  ladderTask,
  makeRng,
  namePool,
  nameWord,
  poolFileNames,
  poolOfSeed,
  rlOnlyPair,
  synthesize,
  type TaskBindings,
  writeTask,
} from "../synth/index.ts"
import {
  dockerAvailable,
  runTaskInDocker,
  runTasksLocally,
  type TaskRun,
} from "../synth/testing.ts"
import {
  DEFAULT_OOD_FAMILIES,
  type LadderTask,
  ladderDecontam,
  ladderSplits,
  parseRungs,
  rungOf,
  turnsFor,
  writeLadder,
} from "./index.ts"

const scratch = mkdtempSync(join(tmpdir(), "t1-ladder-test-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** Every file under `dir`: relative path -> mode and bytes. */
const snapshot = (dir: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name)
      if (e.isDirectory()) walk(p)
      else
        out[relative(dir, p)] =
          `${(statSync(p).mode & 0o777).toString(8)} ${readFileSync(p, "utf8")}`
    }
  }
  walk(dir)
  return out
}

const OPTIONS = { seed: 3, trainPerFamily: 12, evalPerFamily: 6 } as const

/** The held-out families of the default rungs (1–3). */
const OOD_OF_RUNGS_1_TO_3 = DEFAULT_OOD_FAMILIES.filter((n) =>
  LADDER_FAMILIES.some((f) => f.name === n),
)

/** Runs jobs a few at a time. */
const pool = async (jobs: ReadonlyArray<() => Promise<void>>, concurrency: number) => {
  const queue = [...jobs]
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let job = queue.shift(); job !== undefined; job = queue.shift()) await job()
    }),
  )
}

const bindingsOf = (task: LadderTask): TaskBindings => {
  const b = task.generated.bindings
  if (b === undefined) throw new Error(`${task.id} has no bindings`)
  return b
}

describe("the ladder families", () => {
  it("are registered for t1 tasks synth, apart from the multi-step families", () => {
    expect(LADDER_FAMILIES.length).toBeGreaterThanOrEqual(20)
    for (const f of LADDER_FAMILIES) {
      expect(familyRegistry[f.name], f.name).toBe(f)
      expect(f.name).toMatch(/^[a-z]+(-[a-z]+)*$/)
      expect(FAMILIES.some((c) => c.name === f.name)).toBe(false)
      expect([1, 2, 3]).toContain(f.rung)
      expect(f.tags).toEqual(["file-ops", "ladder", `rung-${f.rung}`])
    }
    for (const rung of [1, 2, 3])
      expect(LADDER_FAMILIES.filter((f) => f.rung === rung).length).toBeGreaterThanOrEqual(5)
    for (const f of FAMILIES) expect(rungOf(f)).toBe(4)
  })

  it("give one short sentence and one command per rung, with several tests", () => {
    for (const f of LADDER_FAMILIES)
      for (const d of DIFFICULTIES)
        for (const seed of [0, 1, 1_000_000, 1_000_001]) {
          const task = generateTask(f, seed, 0, d)
          const what = `${f.name} ${d} ${seed}`
          const sentences = task.instruction.split("\n")
          expect(sentences, what).toHaveLength(f.rung as number)
          for (const s of sentences) expect(s, what).toMatch(/^[A-Z][^`\n]*\.$/)
          const commands = solutionCommands(task.solution)
          expect(commands, what).toHaveLength(f.rung as number)
          expect(task.solution).toBe(
            `#!/usr/bin/env bash\nset -euo pipefail\n${commands.join("\n")}\n`,
          )
          for (const c of commands) expect(c, what).not.toContain("\n")
          expect(task.testsFormat, what).toBe("script")
          const names = [...task.tests.matchAll(/^(test_\w+)\(\) \{$/gm)].map((m) => m[1])
          expect(names.length, what).toBe(task.expectedTests)
          expect(new Set(names).size, what).toBe(names.length)
          // delete-file has one test (the file is gone); the others one per checked aspect.
          expect(task.expectedTests, what).toBeGreaterThanOrEqual(f.name === "delete-file" ? 1 : 2)
          for (const text of [task.instruction, task.setup, task.solution, task.tests])
            expect(text, what).not.toMatch(/undefined|NaN|\[object Object\]/)
          expect(task.setup.startsWith("#!/usr/bin/env bash\nset -euo pipefail\n")).toBe(true)
          expect(task.agentTimeoutSec).toBe(120)
        }
  })

  it("write every name in the instruction as the command writes it, so its tokens match", () => {
    const tokenizer = loadBundledTokenizer()
    const ids = (text: string) => Array.from(tokenizer.encode(text)).join(",")
    for (const f of LADDER_FAMILIES)
      for (const seed of [0, 1_000_000]) {
        const task = generateTask(f, seed, 0, "hard")
        const bindings = task.bindings
        if (bindings === undefined) throw new Error(`${f.name} has no bindings`)
        const commands = solutionCommands(task.solution)
        const instructed = [
          ...bindings.files,
          ...bindings.dirs,
          ...bindings.words,
          ...bindings.values,
        ].filter((name) => task.instruction.includes(` ${name}`))
        expect(instructed.length, f.name).toBeGreaterThan(0)
        for (const name of instructed) {
          const piece = ids(` ${name}`)
          expect(`,${ids(task.instruction)},`, `${f.name}: ${name}`).toContain(`,${piece},`)
          expect(
            commands.some((c) => `,${ids(c)},`.includes(`,${piece},`)),
            `${f.name}: ${name} in ${commands.join(" | ")}`,
          ).toBe(true)
        }
        // Short: about 14 tokens a sentence and 12 a command.
        expect(tokenizer.encode(task.instruction).length, f.name).toBeLessThanOrEqual(
          24 * (f.rung as number),
        )
        for (const c of commands) expect(tokenizer.encode(c).length, c).toBeLessThanOrEqual(20)
      }
  })

  it("draw train and eval names from disjoint pools: every word and every digit has eval and train names", () => {
    const train = namePool("train")
    const held = namePool("eval")
    expect(train.names.filter((x) => held.names.includes(x))).toEqual([])
    expect(train.names.length + held.names.length).toBe(LADDER_WORDS.length * LADDER_DIGITS.length)
    LADDER_WORDS.forEach((word, i) => {
      const evalDigits = LADDER_DIGITS.filter((d) => held.names.includes(`${word}${d}`))
      expect(evalDigits.length, word).toBe(2)
      LADDER_DIGITS.forEach((d, k) => {
        expect(evalPair(i, k), `${word}${d}`).toBe(held.names.includes(`${word}${d}`))
        expect(nameWord(`${word}${d}`)).toBe(word)
      })
    })
    // Every digit follows some words in train and others in eval: none is an eval-only token.
    for (const d of LADDER_DIGITS) {
      expect(train.names.filter((n) => n.endsWith(d)).length, d).toBeGreaterThan(10)
      expect(held.names.filter((n) => n.endsWith(d)).length, d).toBeGreaterThan(3)
    }
    for (const name of poolFileNames(held)) expect(name.endsWith(`.${LADDER_EXT}`)).toBe(true)
  })

  it("keep a demo pool inside the train pool: one train pair in four is left to RL", () => {
    const demo = namePool("demo")
    const train = namePool("train")
    for (const n of demo.names) expect(train.names).toContain(n)
    LADDER_WORDS.forEach((word, i) => {
      LADDER_DIGITS.forEach((d, k) => {
        const name = `${word}${d}`
        expect(inPool(i, k, "demo"), name).toBe(demo.names.includes(name))
        expect(rlOnlyPair(i, k), name).toBe(
          train.names.includes(name) && !demo.names.includes(name),
        )
      })
    })
    expect(demo.names.length).toBe((train.names.length * 3) / 4)
    const [first] = LADDER_FAMILIES
    if (first === undefined) throw new Error("no ladder family")
    expect(() => generateTask(first, 1_000_001, 0, "easy", "demo")).toThrow(
      /demo pool needs a train seed/,
    )
  })

  it("are two tokens in the bundled tokenizer, the word and the digit, and both extensions one", () => {
    const tokenizer = loadBundledTokenizer()
    for (const w of LADDER_WORDS) expect(tokenizer.encode(` ${w}`).length, w).toBe(1)
    for (const n of [...namePool("train").names, ...namePool("eval").names]) {
      const ids = [...tokenizer.encode(` ${n}.txt`)]
      expect(ids.slice(0, 2), n).toEqual([
        ...tokenizer.encode(` ${nameWord(n)}`),
        ...tokenizer.encode(n.slice(-1)),
      ])
    }
    for (const e of [LADDER_EXT, LADDER_TRAP_EXT]) expect(tokenizer.encode(e).length, e).toBe(1)
  })
})

/**
 * Every ladder family at every difficulty, with train and eval names, run on this host (bash,
 * python3, pytest) in a temporary workdir: the reference solution, played one command per turn,
 * passes every test; a no-op agent passes none (nothing is paid for doing nothing); the reference
 * plus a stray file passes none; the first step alone of a multi-step task passes some, not all.
 */
describe("every ladder task, run locally", () => {
  const runs = new Map<string, { expected: number; turns: number; run: TaskRun }>()
  const stray = new Map<string, TaskRun>()
  const firstStep = new Map<string, TaskRun>()

  beforeAll(async () => {
    const planned: Array<{ key: string; expected: number; dir: string; turns: string[] }> = []
    for (const f of LADDER_FAMILIES)
      for (const d of DIFFICULTIES)
        for (const seed of [7, 1_000_007]) {
          const [task] = await Effect.runPromise(
            synthesize({
              family: f.name,
              seed,
              count: 1,
              out: join(scratch, "local"),
              difficulty: d,
            }),
          )
          if (task === undefined) throw new Error("synthesize wrote nothing")
          planned.push({
            key: `${f.name}/${d}/${seed}`,
            expected: task.generated.expectedTests,
            dir: task.dir,
            turns: [...solutionCommands(task.generated.solution)],
          })
        }
    const results = await runTasksLocally([
      ...planned.map(({ dir, turns }) => ({ dir, turns })),
      ...planned.map(({ dir, turns }) => ({ dir, turns: [...turns, "echo x > stray9.txt"] })),
      ...planned.map(({ dir, turns }) => ({ dir, turns: turns.slice(0, 1) })),
    ])
    const n = planned.length
    planned.forEach((p, i) => {
      runs.set(p.key, { expected: p.expected, turns: p.turns.length, run: results[i] as TaskRun })
      stray.set(p.key, results[n + i] as TaskRun)
      firstStep.set(p.key, results[2 * n + i] as TaskRun)
    })
  }, 300_000)

  for (const f of LADDER_FAMILIES)
    it(`${f.name}: the reference passes every test; a no-op or a stray file none`, () => {
      for (const d of DIFFICULTIES)
        for (const seed of [7, 1_000_007]) {
          const key = `${f.name}/${d}/${seed}`
          const entry = runs.get(key)
          expect(entry, `${key} ran`).toBeDefined()
          const { expected, turns, run } = entry as {
            expected: number
            turns: number
            run: TaskRun
          }
          expect(turns).toBe(f.rung)
          expect({ key, failed: run.solved.failed, problems: run.problems }).toEqual({
            key,
            failed: [],
            problems: "",
          })
          expect(run.solved.passed.length, key).toBe(expected)
          expect(run.noop.passed.length + run.noop.failed.length, key).toBe(expected)
          expect(run.noop.passed, `${key}: no-op`).toEqual([])
          expect(stray.get(key)?.solved.passed, `${key}: reference + stray file`).toEqual([])
          const first = firstStep.get(key)?.solved.passed.length ?? -1
          if (f.rung === 1) expect(first, `${key}: first step`).toBe(expected)
          else {
            // dir-write-move's first step writes a file the task's end state has moved away.
            if (f.name !== "dir-write-move") expect(first, `${key}: first step`).toBeGreaterThan(0)
            expect(first, `${key}: first step`).toBeLessThan(expected)
          }
        }
    })
})

/**
 * The bash tests ladder tasks ship (tests/test.sh) against the same checks rendered as pytest:
 * every family at every difficulty with train and eval names, on the workdirs a policy leaves
 * (nothing done, the reference, the reference with a stray or hidden file, the first step alone)
 * and on the reference's files perturbed in the ways the checks tell apart (no final newline,
 * trailing spaces, an extra blank line, emptied, removed, a folder in its place). Both report
 * the same tests passed.
 */
describe("ladder tests in bash agree with pytest", () => {
  const results: Array<{ key: string; bash: TaskRun; pytest: TaskRun }> = []

  beforeAll(async () => {
    const planned: Array<{ key: string; bash: string; pytest: string; turns: string[][] }> = []
    for (const f of LADDER_FAMILIES)
      for (const [n, d] of DIFFICULTIES.entries()) {
        // Train names at easy and hard, eval names at medium.
        for (const seed of [n % 2 === 0 ? 11 : 1_000_011]) {
          const plan = f.plan(makeRng(`t1-synth/${f.name}/${seed}/0/${d}`), d, {
            pool: poolOfSeed(seed),
          })
          const task = ladderTask(plan)
          const key = `${f.name}/${d}/${seed}`
          const meta = {
            id: key.replaceAll("/", "-"),
            taskSet: "agree",
            family: f.name,
            difficulty: d,
            split: "train" as const,
            tags: [],
          }
          const bashDir = join(scratch, "agree", "bash", meta.id)
          const pytestDir = join(scratch, "agree", "pytest", meta.id)
          await Effect.runPromise(writeTask(bashDir, task, meta))
          await Effect.runPromise(
            writeTask(
              pytestDir,
              { ...task, ...ladderPytest(plan.tests, plan.guard), testsFormat: "pytest" },
              meta,
            ),
          )
          const reference = [...solutionCommands(task.solution)]
          const [file] = (plan.bindings.files.length > 0 ? plan.bindings.files : ["x9.txt"]).slice(
            -1,
          )
          const f1 = file as string
          const perturbed = [
            `printf '%s' "$(cat ${f1})" > t1.tmp && mv t1.tmp ${f1}`,
            `sed -i 's/$/  /' ${f1}`,
            `echo >> ${f1}`,
            `: > ${f1}`,
            `rm -rf ${f1}`,
            `rm -rf ${f1} && mkdir ${f1}`,
            `printf '\\n%s\\n' "$(cat ${f1})" > t1.tmp && mv t1.tmp ${f1}`,
          ]
          planned.push({
            key,
            bash: bashDir,
            pytest: pytestDir,
            // The reference, and four of the twelve workdirs per difficulty in turn, so each
            // family meets every one (a bash run per test is too many forks for all twelve).
            turns: [
              reference,
              [],
              [...reference, "echo x > stray9.txt"],
              [...reference, "touch .hidden9"],
              reference.slice(0, 1),
              ...perturbed.map((p) => [...reference, p]),
            ].filter((_, v) => v === 0 || Math.floor(v / 4) === n),
          })
        }
      }
    const jobs = planned.flatMap((p) =>
      p.turns.flatMap((turns) => [
        { dir: p.bash, turns },
        { dir: p.pytest, turns },
      ]),
    )
    const runs = await runTasksLocally(jobs)
    let at = 0
    for (const p of planned)
      for (const turns of p.turns) {
        results.push({
          key: `${p.key} [${turns.join(" ; ")}]`,
          bash: runs[at] as TaskRun,
          pytest: runs[at + 1] as TaskRun,
        })
        at += 2
      }
  }, 300_000)

  it("pass and fail the same tests on every workdir", () => {
    expect(results.length).toBe(LADDER_FAMILIES.length * (12 + DIFFICULTIES.length - 1))
    let differing = 0
    const sorted = (xs: ReadonlyArray<string>) => [...xs].sort()
    for (const { key, bash, pytest } of results) {
      expect(bash.problems, key).toBe("")
      expect(pytest.problems, key).toBe("")
      for (const phase of ["noop", "solved"] as const) {
        const same =
          JSON.stringify(sorted(bash[phase].passed)) ===
            JSON.stringify(sorted(pytest[phase].passed)) &&
          JSON.stringify(sorted(bash[phase].failed)) ===
            JSON.stringify(sorted(pytest[phase].failed))
        if (!same) differing++
        expect({
          key,
          phase,
          passed: sorted(bash[phase].passed),
          failed: sorted(bash[phase].failed),
        }).toEqual({
          key,
          phase,
          passed: sorted(pytest[phase].passed),
          failed: sorted(pytest[phase].failed),
        })
      }
    }
    expect(differing).toBe(0)
    // The perturbations matter: some pass and some fail tests the reference passes.
    const partly = results.filter(
      (r) => r.pytest.solved.passed.length > 0 && r.pytest.solved.failed.length > 0,
    )
    expect(partly.length).toBeGreaterThan(LADDER_FAMILIES.length / 4)
  })
})

describe("ladderSplits", () => {
  const splits = ladderSplits(OPTIONS)

  it("is deterministic and depends on the seed", () => {
    expect(ladderSplits(OPTIONS)).toEqual(splits)
    const other = ladderSplits({ ...OPTIONS, seed: 4 })
    expect(other.train.map((t) => t.generated.setup)).not.toEqual(
      splits.train.map((t) => t.generated.setup),
    )
  })

  it("gives each train family its train and eval tasks, and each held-out family eval only", () => {
    const ladderNames = LADDER_FAMILIES.map((f) => f.name)
    expect([...splits.families.train, ...splits.families.ood].sort()).toEqual(
      [...ladderNames].sort(),
    )
    expect([...splits.families.ood].sort()).toEqual([...OOD_OF_RUNGS_1_TO_3].sort())
    expect(new Set(DEFAULT_OOD_FAMILIES.map((n) => familyRegistry[n]?.rung))).toEqual(
      new Set([1, 2, 3, 5, 6]),
    )
    expect(splits.train).toHaveLength(splits.families.train.length * OPTIONS.trainPerFamily)
    expect(splits.eval).toHaveLength(splits.families.train.length * OPTIONS.evalPerFamily)
    expect(splits.ood).toHaveLength(splits.families.ood.length * OPTIONS.evalPerFamily)
    const trainFamilies = new Set(splits.train.map((t) => t.family))
    for (const t of splits.ood) expect(trainFamilies.has(t.family), t.id).toBe(false)
    for (const t of splits.eval) expect(trainFamilies.has(t.family), t.id).toBe(true)
    for (const t of splits.train) {
      expect(t.seed).toBe(3)
      expect(t.meta.split).toBe("train")
      expect(t.meta.taskSet).toBe("ladder-train")
      expect(t.meta.tags).toContain(`rung-${t.rung}`)
      expect(t.rung).toBe(familyRegistry[t.family]?.rung)
    }
    for (const t of [...splits.eval, ...splits.ood]) {
      expect(t.seed).toBe(1_000_003)
      expect(t.meta.split).toBe("eval")
    }
    expect(new Set(splits.train.map((t) => t.difficulty))).toEqual(new Set(DIFFICULTIES))
    const ids = [...splits.train, ...splits.eval, ...splits.ood].map((t) => t.id)
    expect(new Set(ids).size).toBe(ids.length)
  })

  it("keeps names and values of eval and OOD tasks out of every train task", () => {
    const seen = {
      files: new Set<string>(),
      dirs: new Set<string>(),
      words: new Set<string>(),
      values: new Set<string>(),
    }
    for (const t of splits.train) {
      const b = bindingsOf(t)
      for (const key of ["files", "dirs", "words", "values"] as const)
        for (const x of b[key]) seen[key].add(x)
    }
    let held = 0
    for (const t of [...splits.eval, ...splits.ood]) {
      const b = bindingsOf(t)
      for (const key of ["files", "dirs", "words", "values"] as const)
        for (const x of b[key]) {
          held++
          expect(seen[key].has(x), `${t.id}: ${key} ${x} is in train`).toBe(false)
        }
      // and every name the instruction shows is one of its bindings
      for (const m of t.generated.instruction.matchAll(/ ([a-z]+\.[a-z]+)/g))
        expect(b.files, t.id).toContain(m[1])
    }
    expect(held).toBeGreaterThan(100)
  })

  it("is decontaminated: eval and OOD tasks share few word 8-grams with train", () => {
    const big = ladderSplits({ seed: 11, trainPerFamily: 60, evalPerFamily: 3 })
    const check = ladderDecontam(big)
    expect(check.split.violations).toEqual([])
    expect(check.report.passed).toBe(true)
    // The test scripts' runner and helpers are scaffold (in every family): what is left is the
    // family's own template with other names, ~0.23 at most (make-dir).
    expect(check.report.scaffold).toBeGreaterThan(0)
    expect(check.report.max).toBeLessThan(0.3)
    expect(check.split.heldOutFamilies).toEqual([...OOD_OF_RUNGS_1_TO_3].sort())
  })

  it("adds the observation rungs on request (obs): train, eval and OOD, decontaminated, names apart", () => {
    const obs = ladderSplits({
      seed: 11,
      trainPerFamily: 30,
      evalPerFamily: 3,
      rungs: parseRungs("obs"),
    })
    expect(new Set(obs.train.map((t) => t.rung))).toEqual(new Set([5, 6, 7]))
    expect([...obs.families.ood].sort()).toEqual(["count-then-copy", "pointer-copy"])
    expect(new Set(obs.eval.map((t) => t.family))).toEqual(new Set(obs.families.train))
    for (const t of obs.train) expect(t.meta.tags).toContain("observe")
    const check = ladderDecontam(obs)
    expect(check.split.violations).toEqual([])
    expect(check.report.passed).toBe(true)
    const trainNames = new Set(obs.train.flatMap((t) => Object.values(bindingsOf(t)).flat()))
    for (const t of [...obs.eval, ...obs.ood])
      for (const x of Object.values(bindingsOf(t)).flat())
        expect(trainNames.has(x), `${t.id}: ${x} is in train`).toBe(false)
  })

  it("adds the multi-step families as rung 4 on request: train and OOD, no in-distribution eval", () => {
    const withTop = ladderSplits({ ...OPTIONS, trainPerFamily: 1, evalPerFamily: 1, rungs: [1, 4] })
    const rung4 = (ts: ReadonlyArray<LadderTask>) => ts.filter((t) => t.rung === 4)
    expect(
      rung4(withTop.train)
        .map((t) => t.family)
        .sort(),
    ).toEqual(
      FAMILIES.map((f) => f.name)
        .filter((n) => !["json-merge", "log-report", "script-tool"].includes(n))
        .sort(),
    )
    expect(
      rung4(withTop.ood)
        .map((t) => t.family)
        .sort(),
    ).toEqual(["json-merge", "log-report", "script-tool"])
    expect(rung4(withTop.eval)).toEqual([])
    expect(new Set(withTop.train.map((t) => t.rung))).toEqual(new Set([1, 4]))
    const check = ladderDecontam(withTop)
    expect(check.report.passed).toBe(true)
    expect(check.split.violations).toEqual([])
  })

  it("draws the first demosPerFamily train tasks of each ladder family from the demo pool", () => {
    const withDemos = ladderSplits({ ...OPTIONS, demosPerFamily: 4 })
    const demoPool = namePool("demo").names
    const trainPool = namePool("train").names
    const demos = withDemos.train.filter((t) => t.demo)
    expect(demos.map((t) => t.index < 4)).toEqual(demos.map(() => true))
    expect(demos.length).toBe(withDemos.families.train.length * 4)
    // Demo tasks keep to the demo pool; RL tasks do not: they use the pairs demos leave out.
    let outside = 0
    for (const t of withDemos.train) {
      const b = bindingsOf(t)
      for (const key of ["files", "dirs", "words", "values"] as const)
        for (const x of b[key].filter((n) => !n.endsWith(`.${LADDER_TRAP_EXT}`))) {
          const name = x.replace(`.${LADDER_EXT}`, "")
          expect(trainPool, `${t.id} ${key}`).toContain(name)
          if (t.demo) expect(demoPool, `${t.id} ${key}`).toContain(name)
          else if (!demoPool.includes(name)) outside++
        }
    }
    expect(outside).toBeGreaterThan(50)
    // Eval and OOD tasks are the same tasks as without demos; the demo tasks' ids are unchanged.
    const plain = ladderSplits(OPTIONS)
    expect(withDemos.eval).toEqual(plain.eval)
    expect(withDemos.ood).toEqual(plain.ood)
    expect(withDemos.train.map((t) => t.id)).toEqual(plain.train.map((t) => t.id))
    expect(() => ladderSplits({ ...OPTIONS, demosPerFamily: 13 })).toThrow(/demosPerFamily/)
  })

  it("parses --rungs: each allowed rung once, anything else refused", () => {
    expect(parseRungs("1,3")).toEqual([1, 3])
    expect(parseRungs("4")).toEqual([4])
    expect(() => parseRungs("4", [1, 2, 3])).toThrow(/takes 1, 2, 3/)
    expect(() => parseRungs("1,1")).toThrow(RangeError)
    expect(() => parseRungs("")).toThrow(RangeError)
    expect(() => parseRungs("x")).toThrow(RangeError)
    // `obs`: every observation rung allowed; the error lists the valid names.
    expect(parseRungs("obs")).toEqual([5, 6, 7])
    // Turns enough for the longest reference (rung 7: ten commands) and the turn saying done.
    expect(turnsFor([1], 5)).toBe(5)
    expect(turnsFor(parseRungs("obs"), 5)).toBe(11)
    expect(turnsFor([5], 2)).toBe(3)
    expect(parseRungs("1,obs")).toEqual([1, 5, 6, 7])
    expect(() => parseRungs("obs,5")).toThrow(RangeError)
    expect(() => parseRungs("obs", [1, 2, 3])).toThrow(/takes 1, 2, 3, separated/)
    expect(() => parseRungs("8")).toThrow(/takes 1, 2, 3, 4, 5, 6, 7, or obs \(5,6,7\)/)
  })

  it("refuses options it cannot honour", () => {
    expect(() => ladderSplits({ ...OPTIONS, seed: 1_000_000 })).toThrow(RangeError)
    expect(() => ladderSplits({ ...OPTIONS, trainPerFamily: -1 })).toThrow(RangeError)
    expect(() => ladderSplits({ ...OPTIONS, oodFamilies: ["csv-aggregate"] })).toThrow(
      /not a ladder family/,
    )
    expect(() => ladderSplits({ ...OPTIONS, rungs: [8 as 1] })).toThrow(/no rung 8/)
  })
})

describe("writeLadder", () => {
  it("writes byte-identical native task sets that load and pass t1 tasks decontam", async () => {
    const a = await Effect.runPromise(writeLadder(join(scratch, "a"), OPTIONS))
    const b = await Effect.runPromise(writeLadder(join(scratch, "b"), OPTIONS))
    for (const set of ["train", "eval", "ood"] as const) {
      expect(readdirSync(a.dirs[set]).length).toBe(a.splits[set].length)
      expect(snapshot(a.dirs[set]), set).toEqual(snapshot(b.dirs[set]))
    }
    // What `t1 tasks decontam --train <train> --eval <eval>,<ood>` computes, from disk.
    const train = await Effect.runPromise(readTaskSet([a.dirs.train]))
    const held = await Effect.runPromise(readTaskSet([a.dirs.eval, a.dirs.ood]))
    const report = decontaminate(train, held)
    expect(report.passed).toBe(true)
    expect(report.max).toBeCloseTo(a.check.report.max, 10)
    expect(checkSplits(train, held).violations).toEqual([])
    const loaded = await Effect.runPromise(loadTasks([a.dirs.train, a.dirs.eval, a.dirs.ood]))
    expect(loaded).toHaveLength(a.splits.train.length + a.splits.eval.length + a.splits.ood.length)
    for (const t of loaded) {
      expect(
        t.tags.some((tag) => /^rung-[1-3]$/.test(tag)),
        t.id,
      ).toBe(true)
      expect(t.verifier.expectedTests).toBeGreaterThanOrEqual(1)
    }
    // Writing again replaces the sets: no stale task survives a smaller ladder.
    const small = await Effect.runPromise(
      writeLadder(join(scratch, "a"), { ...OPTIONS, trainPerFamily: 1, evalPerFamily: 1 }),
    )
    expect(readdirSync(small.dirs.train).length).toBe(small.splits.train.length)
  })
})

/** A sample in the real base image: one hard eval-pool task per family. */
describe("ladder tasks in a sandbox", () => {
  const runs = new Map<string, TaskRun>()
  beforeAll(async () => {
    if (!(await dockerAvailable()))
      throw new Error(
        "no Docker engine with t1-base:latest: start dockerd (as .ci/run does) and run t1 image build-base",
      )
    await pool(
      LADDER_FAMILIES.map((f) => async () => {
        const [task] = await Effect.runPromise(
          synthesize({
            family: f.name,
            seed: 1_000_009,
            count: 1,
            out: join(scratch, "docker"),
            difficulty: "hard",
          }),
        )
        if (task === undefined) throw new Error("synthesize wrote nothing")
        runs.set(f.name, await runTaskInDocker(task.dir))
      }),
      4,
    )
  }, 600_000)

  it("passes every test with the reference and not with a no-op, in t1-base:latest", () => {
    for (const f of LADDER_FAMILIES) {
      const run = runs.get(f.name)
      expect(run, f.name).toBeDefined()
      const r = run as TaskRun
      expect({ family: f.name, failed: r.solved.failed, problems: r.problems }).toEqual({
        family: f.name,
        failed: [],
        problems: "",
      })
      expect(r.noop.failed.length, f.name).toBeGreaterThan(0)
    }
  })
})
