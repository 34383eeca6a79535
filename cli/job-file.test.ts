import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { create, equals } from "@bufbuild/protobuf"
import { describe, expect, it } from "vitest"
import { JobKind, JobSpecSchema, TaskSplit } from "../proto/index.ts"
import { validateJobSpec } from "../services/gateway/validate.ts"
import {
  closest,
  contentRequestId,
  detectFormat,
  formatProblem,
  JobFileError,
  type JobFileProblem,
  parseDuration,
  parseJobFile,
  specToJson,
} from "./job-file.ts"

const EXAMPLES = fileURLToPath(new URL("./examples", import.meta.url))

/** The problems of a YAML job file, formatted as `t1 submit` prints them. */
const problems = (text: string, file = "job.yaml"): string[] =>
  parseJobFile(text, file).problems.map((p) => formatProblem(file, p))

const BASE = "kind: eval\ntask_set: tasks/bundled/eval\n"

/** The one problem of BASE plus `extra`. */
const only = (extra: string): JobFileProblem => {
  const found = parseJobFile(BASE + extra, "job.yaml").problems
  expect(found, JSON.stringify(found)).toHaveLength(1)
  return found[0] as JobFileProblem
}

describe("job files", () => {
  it.each(["eval.yaml", "train.yaml"])("accepts the example %s", (name) => {
    const file = `${EXAMPLES}/${name}`
    const parsed = parseJobFile(readFileSync(file, "utf8"), file)
    expect(parsed.problems).toEqual([])
    expect(parsed.format).toBe("yaml")
    expect(validateJobSpec(parsed.spec)).toEqual([])
    expect(parsed.spec.kind).toBe(name === "eval.yaml" ? JobKind.EVAL : JobKind.TRAIN)
  })

  it("converts every kind of field", () => {
    const { spec, problems: found } = parseJobFile(
      `name: nightly
kind: train
task_set: a,b
task_ids: [t1, t2]
split: EVAL
policy_ref: tinymoe:init
sampling: { temperature: 0.7, top_p: 1, max_tokens: 64, stop_token_ids: [1, 2], seed: 7 }
limits:
  max_turns: 30
  wall_clock_sec: 1h30m
  command_timeout_ms: 1.5s
  observation_max_bytes: 4096
samples_per_task: 4
learner:
  lr: 1e-5
  clip_eps: 0.2
  r3: true
  ppo_steps: 10
labels: { team: research, "a.b/c": "1" }
max_episode_attempts: 3
seed: 18446744073709551615
`,
      "job.yml",
    )
    expect(found).toEqual([])
    expect(spec).toMatchObject({
      name: "nightly",
      kind: JobKind.TRAIN,
      taskSet: "a,b",
      taskIds: ["t1", "t2"],
      split: TaskSplit.EVAL,
      policyRef: "tinymoe:init",
      sampling: { temperature: 0.7, topP: 1, maxTokens: 64, stopTokenIds: [1, 2], seed: 7n },
      limits: {
        maxTurns: 30,
        wallClockSec: 5400,
        commandTimeoutMs: 1500,
        observationMaxBytes: 4096,
      },
      samplesPerTask: 4,
      learner: { lr: 1e-5, clipEps: 0.2, r3: true, ppoSteps: 10 },
      labels: { team: "research", "a.b/c": "1" },
      maxEpisodeAttempts: 3,
      seed: 18446744073709551615n,
    })
  })

  it("takes full enum names and an empty block as an empty message", () => {
    const { spec, problems: found } = parseJobFile(
      "kind: JOB_KIND_TRAIN\ntask_set: x\nsplit: task_split_train\nlearner:\n",
      "job.yaml",
    )
    expect(found).toEqual([])
    expect([spec.kind, spec.split, spec.learner !== undefined]).toEqual([
      JobKind.TRAIN,
      TaskSplit.TRAIN,
      true,
    ])
  })

  it.each<[string, string, string, number | undefined]>([
    // enum names
    [
      "kind",
      "kind: evl\ntask_set: x\n",
      'must be one of train, eval, rollout, sft, got string "evl" (did you mean eval?)',
      1,
    ],
    ["kind", "kind: evaluation\ntask_set: x\n", "(did you mean eval?)", 1],
    ["kind", "kind: 2\ntask_set: x\n", "must be one of train, eval, rollout, sft, got number 2", 1],
    ["split", `${BASE}split: test\n`, 'must be one of train, eval, got string "test"', 3],
    ["split", `${BASE}split: unspecified\n`, "(leave the key out for the default)", 3],
    // unknown keys
    ["task_sets", "kind: eval\ntask_sets: x\n", "unknown field; did you mean task_set?", 2],
    [
      "taskSet",
      "kind: eval\ntaskSet: x\n",
      "did you mean task_set? (job files use the proto field names)",
      2,
    ],
    [
      "learner.clip_epsilon",
      `kind: train\ntask_set: x\nlearner:\n  clip_epsilon: 0.2\n`,
      "did you mean clip_eps?",
      4,
    ],
    ["frobnicate", `${BASE}frobnicate: 1\n`, "unknown field; JobSpec has name, kind, task_set", 3],
    ["sampling.temp", `${BASE}sampling: { temp: 1 }\n`, "did you mean temperature?", 3],
    // wrong types
    ["name", `${BASE}name: 42\n`, 'must be a string (quote it: "42"), got number 42', 3],
    ["task_set", "kind: eval\ntask_set: [a]\n", "must be a string, got a list", 2],
    ["task_ids", `${BASE}task_ids: a\n`, 'must be a list, got string "a"', 3],
    ["task_ids[1]", `${BASE}task_ids: [a, 7]\n`, 'must be a string (quote it: "7")', 3],
    [
      "sampling",
      `${BASE}sampling: 3\n`,
      "must be a mapping of SamplingParams fields (temperature, top_p",
      3,
    ],
    [
      "sampling.temperature",
      `${BASE}sampling: { temperature: hot }\n`,
      'must be a number, got string "hot"',
      3,
    ],
    [
      "learner.r3",
      "kind: train\ntask_set: x\nlearner: { r3: yes }\n",
      'must be true or false, got string "yes"',
      3,
    ],
    ["samples_per_task", `${BASE}samples_per_task: "4"\n`, 'must be an integer, got string "4"', 3],
    ['labels["team"]', `${BASE}labels: { team: 1 }\n`, 'must be a string (quote it: "1")', 3],
    ["labels", `${BASE}labels: [a]\n`, "must be a mapping, got a list", 3],
    // numbers out of range
    [
      "samples_per_task",
      `${BASE}samples_per_task: -1\n`,
      "must be an integer in [0, 4294967295], got -1",
      3,
    ],
    ["limits.max_turns", `${BASE}limits: { max_turns: 4294967296 }\n`, "in [0, 4294967295]", 3],
    [
      "limits.max_turns",
      `${BASE}limits: { max_turns: 2.5 }\n`,
      "must be an integer, got number 2.5",
      3,
    ],
    ["seed", `${BASE}seed: -3\n`, "must be an integer in [0, 18446744073709551615], got -3", 3],
    ["sampling.top_p", `${BASE}sampling: { top_p: .nan }\n`, "must be a finite number, got NaN", 3],
    // durations
    [
      "limits.wall_clock_sec",
      `${BASE}limits: { wall_clock_sec: 1500ms }\n`,
      "must be a whole number of seconds, got 1500ms",
      3,
    ],
    [
      "limits.command_timeout_ms",
      `${BASE}limits: { command_timeout_ms: soon }\n`,
      "a number of milliseconds or a duration like 90s, 10m, 1h30m, 250ms",
      3,
    ],
    // the gateway's rules (validateJobSpec), located in the file
    ["samples_per_task", `${BASE}samples_per_task: 5000\n`, "must be <= 1024, got 5000", 3],
    [
      "learner.clip_eps",
      "kind: train\ntask_set: x\nlearner:\n  clip_eps: 1.5\n",
      "must be in (0, 1), got 1.5",
      4,
    ],
    ["learner", "kind: train\ntask_set: x\n", "required for JOB_KIND_TRAIN", undefined],
    ["task_set", "kind: eval\n", "required", undefined],
    ["task_ids[2]", `${BASE}task_ids: [a, b, a]\n`, "duplicate of spec.task_ids[0]", 3],
    ["task_set", "kind: eval\ntask_set: a b\n", "must not contain whitespace", 2],
    ['labels["bad key"]', `${BASE}labels: { "bad key": x }\n`, "key must match", 3],
    [
      "eval_task_set",
      `${BASE}eval_task_set: tasks/bundled/eval\n`,
      "periodic evaluation during training is not run",
      3,
    ],
    [
      "limits.command_timeout_ms",
      `${BASE}limits: { wall_clock_sec: 10s, command_timeout_ms: 1m }\n`,
      "must be <= spec.limits.wall_clock_sec × 1000 (10000), got 60000",
      3,
    ],
  ])("reports spec.%s", (path, text, reason, line) => {
    const found = parseJobFile(text, "job.yaml").problems
    const hit = found.find((p) => p.fieldPath === `spec.${path}`)
    expect(hit, JSON.stringify(found)).toBeDefined()
    expect(hit?.reason).toContain(reason)
    expect(hit?.line).toBe(line)
  })

  it("names list items by their index in the file", () => {
    expect(problems(`${BASE}task_ids: [7, a, a]\n`)).toEqual([
      'job.yaml:3:12: spec.task_ids[0]: must be a string (quote it: "7"), got number 7',
    ])
  })

  it("points at the offending value: line and column", () => {
    expect(only("limits:\n  max_turns: -4\n")).toEqual({
      fieldPath: "spec.limits.max_turns",
      reason: "must be an integer in [0, 4294967295], got -4",
      line: 4,
      col: 14,
    })
  })

  it("reports every problem at once, in file order, without repeating one", () => {
    const text = `name: x
kind: evl
taskset: tasks/bundled/eval
samples_per_task: 2000
sampling:
  top_p: 2
learner: { r3: maybe }
`
    expect(problems(text)).toEqual([
      'job.yaml:2:7: spec.kind: must be one of train, eval, rollout, sft, got string "evl" (did you mean eval?)',
      "job.yaml:3:1: spec.taskset: unknown field; did you mean task_set?",
      "job.yaml:4:19: spec.samples_per_task: must be <= 1024, got 2000",
      "job.yaml:6:10: spec.sampling.top_p: must be in [0, 1], got 2",
      'job.yaml:7:16: spec.learner.r3: must be true or false, got string "maybe"',
    ])
    // Not also "spec.kind: must be JOB_KIND_TRAIN…" nor "spec.task_set: required".
  })

  it("gives the gateway's own messages", () => {
    const spec = create(JobSpecSchema, {
      kind: JobKind.TRAIN,
      taskSet: "x",
      learner: { clipEps: 1.5, gamma: 2, batchTrajectories: 2, minibatches: 4 },
    })
    const gateway = validateJobSpec(spec).map((v) => `${v.fieldPath}: ${v.reason}`)
    const local = parseJobFile(
      "kind: train\ntask_set: x\nlearner: { clip_eps: 1.5, gamma: 2, batch_trajectories: 2, minibatches: 4 }\n",
      "j.yaml",
    ).problems.map((p) => `${p.fieldPath}: ${p.reason}`)
    expect(gateway).toHaveLength(3)
    expect(local).toEqual(gateway)
  })

  it("reports YAML syntax errors with their line", () => {
    expect(problems("kind: eval\ntask_set: [a, b\nname: x\n")).toEqual([
      expect.stringMatching(/^job\.yaml:3:1: YAML syntax error: /),
    ])
    expect(problems("kind: eval\ntask_set: x\nlabels:\n  a: b\n c: d\n")).toEqual([
      "job.yaml:5:1: YAML syntax error: All mapping items must start at the same column",
    ])
    expect(problems("kind: eval\ntask_set: x\nname: a: b\n")).toEqual([
      "job.yaml:3:7: YAML syntax error: Nested mappings are not allowed in compact mappings",
    ])
    expect(problems("kind: eval\nkind: train\ntask_set: x\n")).toEqual([
      "job.yaml:2:1: YAML syntax error: Map keys must be unique",
    ])
  })

  it("reads JSON, by extension or by content", () => {
    const json =
      '{\n  "kind": "eval",\n  "task_set": "x",\n  "seed": "12",\n  "limits": {"max_turns": 3}\n}\n'
    for (const file of ["job.json", "job.txt", "-"]) {
      const parsed = parseJobFile(json, file)
      expect(parsed.format).toBe("json")
      expect(parsed.problems).toEqual([])
      expect([parsed.spec.seed, parsed.spec.limits?.maxTurns]).toEqual([12n, 3])
    }
    expect(detectFormat("job.yml", json)).toBe("yaml")
    expect(detectFormat("job", "kind: eval")).toBe("yaml")
    expect(problems('{\n  "kind": "eval",\n  "task_set": "x",\n}\n', "job.json")).toEqual([
      "job.json:4:1: JSON syntax error: Expected double-quoted property name",
    ])
    expect(problems('{"kind": "evl", "task_set": "x"}', "job.json")).toEqual([
      'job.json:1:10: spec.kind: must be one of train, eval, rollout, sft, got string "evl" (did you mean eval?)',
    ])
  })

  it("refuses files that are not a mapping", () => {
    expect(problems("")).toEqual([
      expect.stringMatching(
        /^job\.yaml: spec: the file is empty; expected a mapping of JobSpec fields \(name, kind/,
      ),
    ])
    expect(problems("- kind: eval\n")).toEqual([
      expect.stringMatching(
        /^job\.yaml:1:1: spec: must be a mapping of JobSpec fields .*, got a list$/,
      ),
    ])
  })

  it("resolves YAML anchors", () => {
    const { spec, problems: found } = parseJobFile(
      "kind: eval\ntask_set: &dir tasks/bundled/eval\nname: *dir\n",
      "job.yaml",
    )
    expect(found).toEqual([])
    expect(spec.name).toBe("tasks/bundled/eval")
  })

  it("prints a normalised spec that reads back as the same spec", () => {
    for (const name of ["eval.yaml", "train.yaml"]) {
      const { spec } = parseJobFile(readFileSync(`${EXAMPLES}/${name}`, "utf8"), name)
      const again = parseJobFile(JSON.stringify(specToJson(spec), null, 2), "spec.json")
      expect(again.problems).toEqual([])
      expect(equals(JobSpecSchema, again.spec, spec)).toBe(true)
    }
  })

  it("formats the error the way t1 prints it", () => {
    const error = new JobFileError({
      file: "j.yaml",
      problems: [
        { fieldPath: "spec.kind", reason: "bad", line: 2, col: 7 },
        { fieldPath: "spec.learner", reason: "required" },
      ],
    })
    expect(error.message).toBe(
      "invalid job file j.yaml (2 problems):\n  j.yaml:2:7: spec.kind: bad\n  j.yaml: spec.learner: required",
    )
    expect(
      new JobFileError({ file: "j.yaml", problems: [{ fieldPath: "", reason: "x" }] }).message,
    ).toBe("invalid job file: j.yaml: x")
  })

  it("has helpers for suggestions, durations and request ids", () => {
    expect(closest("smaples_per_task", ["samples_per_task", "seed"])).toBe("samples_per_task")
    expect(closest("maxTurns", ["max_turns", "max_tokens"])).toBe("max_turns")
    expect(closest("zzz", ["name", "kind"])).toBeUndefined()
    expect([parseDuration("90s"), parseDuration("1h30m"), parseDuration("250ms")]).toEqual([
      90_000, 5_400_000, 250,
    ])
    expect([parseDuration("10"), parseDuration("m"), parseDuration("1d")]).toEqual([
      undefined,
      undefined,
      undefined,
    ])
    expect(contentRequestId("a")).toBe(contentRequestId(Buffer.from("a")))
    expect(contentRequestId("a")).not.toBe(contentRequestId("b"))
    expect(contentRequestId("a")).toMatch(/^sha256-[0-9a-f]{64}$/)
  })
})
