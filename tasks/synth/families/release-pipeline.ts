import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles, type FileSpec } from "../shell.ts"
import { ADJECTIVES, FIRST_NAMES, NOUNS, VERBS } from "../vocabulary.ts"

/**
 * The long-horizon family: a release is assembled in 5 (easy), 10 (medium) or 15–20 (hard)
 * ordered steps drawn from a pool, each checked by its own test, so a partial run earns a
 * partial reward. Steps may build on earlier ones (scripts are copied before they are made
 * executable, data files exist before their checksums are taken, the tarball comes last).
 */
interface Context {
  readonly rng: Rng
  readonly project: string
  readonly version: string
}

interface Step {
  readonly id: string
  /** Steps run in ascending order. */
  readonly order: number
  readonly requires: ReadonlyArray<string>
  readonly build: (ctx: Context) => {
    readonly files: ReadonlyArray<FileSpec>
    readonly instruction: string
    readonly solution: ReadonlyArray<string>
    readonly test: ReadonlyArray<string>
  }
}

const words = (rng: Rng, n: number) =>
  Array.from({ length: n }, () => rng.pick([...NOUNS, ...VERBS])).join(" ")

/** Shared inputs several steps read; drawn once per task so the steps agree on them. */
interface Shared {
  readonly scripts: ReadonlyArray<FileSpec>
  readonly events: ReadonlyArray<string>
  readonly metrics: ReadonlyArray<ReadonlyArray<string>>
}

const shared = new WeakMap<Context, Shared>()
const sharedOf = (ctx: Context): Shared => {
  const known = shared.get(ctx)
  if (known !== undefined) return known
  const { rng } = ctx
  const scripts = rng.sample(NOUNS, rng.int(2, 4)).map((n) => ({
    path: `src/${n}.sh`,
    content: `#!/bin/sh\n# ${n}\n${Array.from({ length: rng.int(1, 4) }, () => `echo ${words(rng, 2)}`).join("\n")}\n`,
  }))
  const users = rng.sample(FIRST_NAMES, rng.int(3, 6))
  const events = Array.from({ length: rng.int(12, 24) }, (_, i) => {
    const level = rng.pick(["INFO", "INFO", "WARN", "ERROR"])
    return `2024-0${rng.int(1, 9)}-1${i % 10} ${level} user=${rng.pick(users)} ${words(rng, 3)}`
  })
  if (!events.some((e) => e.includes(" ERROR ")))
    events[0] = (events[0] as string).replace(/ (INFO|WARN) /, " ERROR ")
  const metrics = [
    ["metric", "value", "unit"],
    ...rng
      .sample(NOUNS, rng.int(3, 6))
      .map((n) => [`${n}_total`, String(rng.int(0, 9999)), rng.pick(["ms", "count", "bytes"])]),
  ]
  const value = { scripts, events, metrics }
  shared.set(ctx, value)
  return value
}

const STEPS: ReadonlyArray<Step> = [
  {
    id: "folders",
    order: 10,
    requires: [],
    build: () => ({
      files: [],
      instruction: "Create the folders `release/bin`, `release/docs` and `release/data`.",
      solution: ["mkdir -p release/bin release/docs release/data"],
      test: ['for d in ["bin", "docs", "data"]:', '    assert (APP / "release" / d).is_dir(), d'],
    }),
  },
  {
    id: "version_file",
    order: 11,
    requires: [],
    build: ({ version }) => ({
      files: [],
      instruction: `Write the version \`${version}\` into \`release/VERSION\` (just the version and a newline).`,
      solution: [`echo ${version} > release/VERSION`],
      test: [`assert (APP / "release" / "VERSION").read_text().strip() == ${py(version)}`],
    }),
  },
  {
    id: "copy_scripts",
    order: 12,
    requires: [],
    build: (ctx) => {
      const { scripts } = sharedOf(ctx)
      const other = { path: `src/${ctx.rng.pick(NOUNS)}.txt`, content: `${words(ctx.rng, 4)}\n` }
      return {
        files: [...scripts, other],
        instruction:
          "Copy every `.sh` file from `src/` into `release/bin/` (only the `.sh` files).",
        solution: ["cp src/*.sh release/bin/"],
        test: [
          `want = ${py(Object.fromEntries(scripts.map((s) => [s.path.slice(4), s.content])))}`,
          'got = {p.name: p.read_text() for p in (APP / "release" / "bin").iterdir() if p.is_file()}',
          "assert got == want",
        ],
      }
    },
  },
  {
    id: "scripts_executable",
    order: 13,
    requires: ["copy_scripts"],
    build: (ctx) => ({
      files: [],
      instruction: "Make the scripts in `release/bin/` executable with mode `755`.",
      solution: ["chmod 755 release/bin/*.sh"],
      test: [
        `for name in ${py(sharedOf(ctx).scripts.map((s) => s.path.slice(4)))}:`,
        '    assert stat.S_IMODE(os.stat(APP / "release" / "bin" / name).st_mode) == 0o755, name',
      ],
    }),
  },
  {
    id: "notes",
    order: 14,
    requires: [],
    build: ({ rng }) => {
      const notes = rng.sample(NOUNS, rng.int(2, 4)).map((n, i) => ({
        path: `notes/${i + 1}-${n}.md`,
        content: `## ${n}\n${words(rng, 5)} @VERSION@\n`,
      }))
      return {
        files: rng.shuffle(notes),
        instruction:
          "Concatenate the files `notes/*.md`, in file-name order, into `release/docs/NOTES.md`.",
        solution: ["cat $(ls notes/*.md | LC_ALL=C sort) > release/docs/NOTES.md"],
        test: [
          `want = ${py(notes.map((n) => n.content).join(""))}`,
          'got = (APP / "release" / "docs" / "NOTES.md").read_text()',
          "# a later step may fill in the version",
          'assert got.replace(VERSION, "@VERSION@") == want',
        ],
      }
    },
  },
  {
    id: "notes_version",
    order: 15,
    requires: ["notes"],
    build: ({ version }) => ({
      files: [],
      instruction: `In \`release/docs/NOTES.md\`, replace every \`@VERSION@\` with \`${version}\`.`,
      solution: [`sed -i 's/@VERSION@/${version}/g' release/docs/NOTES.md`],
      test: [
        'got = (APP / "release" / "docs" / "NOTES.md").read_text()',
        'assert "@VERSION@" not in got',
        "assert VERSION in got",
      ],
    }),
  },
  {
    id: "metrics_csv",
    order: 16,
    requires: [],
    build: (ctx) => {
      const { metrics } = sharedOf(ctx)
      return {
        files: [
          { path: "raw/metrics.tsv", content: `${metrics.map((r) => r.join("\t")).join("\n")}\n` },
        ],
        instruction:
          "Convert the tab-separated `raw/metrics.tsv` into the comma-separated `release/data/metrics.csv` (same rows, header included).",
        solution: ["tr '\\t' ',' < raw/metrics.tsv > release/data/metrics.csv"],
        test: [
          `assert (APP / "release" / "data" / "metrics.csv").read_text().splitlines() == ${py(metrics.map((r) => r.join(",")))}`,
        ],
      }
    },
  },
  {
    id: "error_count",
    order: 17,
    requires: [],
    build: (ctx) => {
      const { events } = sharedOf(ctx)
      return {
        files: [{ path: "raw/events.log", content: `${events.join("\n")}\n` }],
        instruction:
          "Write the number of lines of `raw/events.log` that contain `ERROR` into `release/data/error_count.txt` (a bare integer).",
        solution: ["grep -c ERROR raw/events.log > release/data/error_count.txt"],
        test: [
          `assert (APP / "release" / "data" / "error_count.txt").read_text().strip() == ${py(String(events.filter((e) => e.includes("ERROR")).length))}`,
        ],
      }
    },
  },
  {
    id: "users",
    order: 18,
    requires: [],
    build: (ctx) => {
      const { events } = sharedOf(ctx)
      const users = [
        ...new Set(events.map((e) => (/user=(\w+)/.exec(e) as RegExpExecArray)[1] as string)),
      ].sort()
      return {
        files: [{ path: "raw/events.log", content: `${events.join("\n")}\n` }],
        instruction:
          "List the distinct user names from the `user=<name>` fields of `raw/events.log`, sorted, one per line, in `release/data/users.txt`.",
        solution: [
          "grep -o 'user=[a-z]*' raw/events.log | cut -d= -f2 | LC_ALL=C sort -u > release/data/users.txt",
        ],
        test: [
          `assert (APP / "release" / "data" / "users.txt").read_text().split() == ${py(users)}`,
        ],
      }
    },
  },
  {
    id: "scores_sorted",
    order: 19,
    requires: [],
    build: ({ rng }) => {
      const scores = rng
        .sample(FIRST_NAMES, rng.int(4, 8))
        .map((n, i) => [n, 7 * i + rng.int(1, 6)] as const)
      const shuffled = rng.shuffle(scores)
      const sorted = [...scores].sort((a, b) => b[1] - a[1]).map(([n, s]) => `${n} ${s}`)
      return {
        files: [
          {
            path: "raw/scores.txt",
            content: `${shuffled.map(([n, s]) => `${n} ${s}`).join("\n")}\n`,
          },
        ],
        instruction:
          "Sort `raw/scores.txt` (lines `<name> <score>`) by score, highest first, into `release/data/scores_sorted.txt`.",
        solution: ["sort -k2,2nr raw/scores.txt > release/data/scores_sorted.txt"],
        test: [
          'got = [" ".join(l.split()) for l in (APP / "release" / "data" / "scores_sorted.txt").read_text().splitlines() if l.strip()]',
          `assert got == ${py(sorted)}`,
        ],
      }
    },
  },
  {
    id: "sample_log",
    order: 20,
    requires: [],
    build: (ctx) => {
      const { events } = sharedOf(ctx)
      const n = ctx.rng.int(3, 6)
      return {
        files: [{ path: "raw/events.log", content: `${events.join("\n")}\n` }],
        instruction: `Put the first ${n} lines of \`raw/events.log\` into \`release/data/sample.log\`.`,
        solution: [`head -n ${n} raw/events.log > release/data/sample.log`],
        test: [
          `assert (APP / "release" / "data" / "sample.log").read_text().splitlines() == ${py(events.slice(0, n))}`,
        ],
      }
    },
  },
  {
    id: "config",
    order: 21,
    requires: [],
    build: ({ rng, project, version }) => {
      const config = {
        name: project,
        version: "0.0.0-dev",
        debug: true,
        workers: rng.int(2, 16),
        region: rng.pick(NOUNS),
      }
      return {
        files: [{ path: "config/app.json", content: `${JSON.stringify(config, null, 2)}\n` }],
        instruction: `Write \`release/config.json\`: the JSON from \`config/app.json\` with \`debug\` set to \`false\` and \`version\` set to \`"${version}"\`, every other key unchanged.`,
        solution: [
          `python3 -c 'import json; c = json.load(open("config/app.json")); c.update(debug=False, version="${version}"); json.dump(c, open("release/config.json", "w"), indent=2)'`,
        ],
        test: [
          'got = json.loads((APP / "release" / "config.json").read_text())',
          `assert got == ${py({ ...config, debug: false, version })}`,
        ],
      }
    },
  },
  {
    id: "remove_tmp",
    order: 22,
    requires: [],
    build: ({ rng }) => {
      const tmps = rng
        .sample(NOUNS, rng.int(2, 3))
        .map((n) => ({ path: `raw/${n}.tmp`, content: "scratch\n" }))
      const keep = { path: `raw/${rng.pick(ADJECTIVES)}-notes.txt`, content: `${words(rng, 3)}\n` }
      return {
        files: [...tmps, keep],
        instruction: "Delete every `*.tmp` file in `raw/` (nothing else).",
        solution: ["rm -f raw/*.tmp"],
        test: [
          'assert list((APP / "raw").glob("*.tmp")) == []',
          `assert (APP / ${py(keep.path)}).exists()`,
        ],
      }
    },
  },
  {
    id: "line_total",
    order: 23,
    requires: [],
    build: (ctx) => {
      const { scripts } = sharedOf(ctx)
      const total = scripts.reduce((s, f) => s + f.content.split("\n").length - 1, 0)
      return {
        files: scripts,
        instruction:
          "Write the total number of lines of all `src/*.sh` files into `release/docs/LINES.txt` (a bare integer).",
        solution: ["cat src/*.sh | wc -l > release/docs/LINES.txt"],
        test: [
          `assert (APP / "release" / "docs" / "LINES.txt").read_text().strip() == ${py(String(total))}`,
        ],
      }
    },
  },
  {
    id: "logs_keep",
    order: 24,
    requires: [],
    build: () => ({
      files: [],
      instruction: "Create an empty file `release/logs/.keep`.",
      solution: ["mkdir -p release/logs", "touch release/logs/.keep"],
      test: [
        'p = APP / "release" / "logs" / ".keep"',
        "assert p.is_file()",
        "assert p.stat().st_size == 0",
      ],
    }),
  },
  {
    id: "changelog",
    order: 25,
    requires: [],
    build: ({ rng, version }) => {
      const changes = Array.from(
        { length: rng.int(2, 5) },
        () => `${rng.pick(["fix", "add", "remove", "speed up"])} ${words(rng, 2)}`,
      )
      return {
        files: [{ path: "changes.txt", content: `${changes.join("\n")}\n` }],
        instruction: `Write \`release/docs/CHANGELOG.md\`: a first line \`## ${version}\`, then each line of \`changes.txt\` prefixed with \`- \`.`,
        solution: [
          `{ echo '## ${version}'; sed 's/^/- /' changes.txt; } > release/docs/CHANGELOG.md`,
        ],
        test: [
          'got = [l.rstrip() for l in (APP / "release" / "docs" / "CHANGELOG.md").read_text().splitlines() if l.strip()]',
          `assert got == ${py([`## ${version}`, ...changes.map((c) => `- ${c}`)])}`,
        ],
      }
    },
  },
  {
    id: "manifest",
    order: 26,
    requires: ["copy_scripts"],
    build: (ctx) => ({
      files: [],
      instruction: `Write \`release/manifest.json\`: an object with \`name\` (\`"${ctx.project}"\`), \`version\` (\`"${ctx.version}"\`) and \`scripts\` (the file names in \`release/bin/\`, sorted).`,
      solution: [
        `python3 -c 'import json, os; json.dump({"name": "${ctx.project}", "version": "${ctx.version}", "scripts": sorted(os.listdir("release/bin"))}, open("release/manifest.json", "w"))'`,
      ],
      test: [
        'got = json.loads((APP / "release" / "manifest.json").read_text())',
        `assert got == ${py({
          name: ctx.project,
          version: ctx.version,
          scripts: sharedOf(ctx)
            .scripts.map((s) => s.path.slice(4))
            .sort(),
        })}`,
      ],
    }),
  },
  {
    id: "current_link",
    order: 27,
    requires: [],
    build: () => ({
      files: [],
      instruction: "Create a symbolic link `current` (in /app) that points to `release`.",
      solution: ["ln -sfn release current"],
      test: [
        'link = APP / "current"',
        "assert link.is_symlink()",
        'assert link.resolve() == (APP / "release").resolve()',
      ],
    }),
  },
  {
    id: "checksums",
    order: 30,
    requires: ["metrics_csv"],
    build: () => ({
      files: [],
      instruction:
        "Write `release/SHA256SUMS` with a `sha256sum` line for every file in `release/data/`, paths relative to `release/` (e.g. `data/metrics.csv`), sorted by path.",
      solution: [
        "(cd release && sha256sum $(find data -type f | LC_ALL=C sort)) > release/SHA256SUMS",
      ],
      test: [
        "import hashlib",
        'lines = [l.split() for l in (APP / "release" / "SHA256SUMS").read_text().splitlines() if l.strip()]',
        'files = sorted(str(p.relative_to(APP / "release")) for p in (APP / "release" / "data").rglob("*") if p.is_file())',
        'assert [p.lstrip("*") for _, p in lines] == files',
        "for digest, path in lines:",
        '    assert hashlib.sha256((APP / "release" / path.lstrip("*")).read_bytes()).hexdigest() == digest, path',
      ],
    }),
  },
  {
    id: "data_readonly",
    order: 31,
    requires: ["metrics_csv"],
    build: () => ({
      files: [],
      instruction: "Make every file in `release/data/` read-only for everybody (mode `444`).",
      solution: ["chmod 444 release/data/*"],
      test: [
        'files = [p for p in (APP / "release" / "data").iterdir() if p.is_file()]',
        "assert len(files) > 0",
        "for p in files:",
        "    assert stat.S_IMODE(os.stat(p).st_mode) == 0o444, p.name",
      ],
    }),
  },
  {
    id: "tarball",
    order: 40,
    requires: [],
    build: ({ project, version }) => ({
      files: [],
      instruction: `Last, pack the \`release/\` folder into \`dist/${project}-${version}.tar.gz\` (gzip-compressed tar; member paths start with \`release/\`).`,
      solution: ["mkdir -p dist", `tar -czf dist/${project}-${version}.tar.gz release`],
      test: [
        "import tarfile",
        `with tarfile.open(APP / "dist" / ${py(`${project}-${version}.tar.gz`)}, "r:gz") as tar:`,
        '    got = {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}',
        'want = {str(p.relative_to(APP)): p.read_bytes() for p in (APP / "release").rglob("*") if p.is_file()}',
        "assert len(got) > 0",
        "assert got == want",
      ],
    }),
  },
]

const COUNTS: Record<Difficulty, readonly [number, number]> = {
  easy: [5, 5],
  medium: [10, 10],
  hard: [15, 20],
}

/** Picks `count` steps, always starting with `folders`, closed under `requires`. */
const chooseSteps = (rng: Rng, count: number): Array<Step> => {
  const byId = new Map(STEPS.map((s) => [s.id, s]))
  const chosen = new Set<string>(["folders"])
  for (const step of rng.shuffle(STEPS.filter((s) => s.id !== "folders"))) {
    if (chosen.size >= count) break
    const needed = [step.id, ...step.requires].filter((id) => !chosen.has(id))
    if (chosen.size + needed.length <= count) for (const id of needed) chosen.add(id)
  }
  return [...chosen].map((id) => byId.get(id) as Step).sort((a, b) => a.order - b.order)
}

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const [lo, hi] = COUNTS[difficulty]
  const ctx: Context = {
    rng,
    project: `${rng.pick(ADJECTIVES)}-${rng.pick(NOUNS)}`,
    version: `${rng.int(0, 3)}.${rng.int(0, 20)}.${rng.int(0, 9)}`,
  }
  const steps = chooseSteps(rng, rng.int(lo, hi))
  const built = steps.map((s) => ({ step: s, ...s.build(ctx) }))
  const files = new Map<string, FileSpec>()
  for (const b of built) for (const f of b.files) files.set(f.path, f)

  const instruction = [
    `You are preparing release ${ctx.version} of the project \`${ctx.project}\`. Carry out these ${steps.length} steps in order (paths are relative to /app):`,
    "",
    ...built.map((b, i) => `${i + 1}. ${b.instruction}`),
  ].join("\n")
  const tests: Array<TestCase> = built.map((b, i) => ({
    name: `step_${String(i + 1).padStart(2, "0")}_${b.step.id}`,
    doc: `step ${i + 1}: ${b.instruction.split("\n")[0]}`,
    body: b.test,
  }))
  return {
    instruction,
    setup: bashScript(createFiles([...files.values()].sort((a, b) => (a.path < b.path ? -1 : 1)))),
    solution: bashScript(built.flatMap((b) => b.solution)),
    ...pytestFile(tests, [`VERSION = ${py(ctx.version)}`]),
    agentTimeoutSec: { easy: 600, medium: 1200, hard: 1800 }[difficulty],
  }
}

export const releasePipeline: TaskFamily = {
  name: "release-pipeline",
  summary:
    "long horizon: assemble a release in 5–20 ordered steps (files, text, JSON, modes, checksums, tar), one test per step",
  tags: ["multi-step", "long-horizon", "file-ops", "text", "json", "archives"],
  generate,
}
