import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { type PyValue, py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles } from "../shell.ts"
import { ADJECTIVES, NOUNS, REGIONS } from "../vocabulary.ts"

type Json = string | number | boolean | null | ReadonlyArray<Json> | { readonly [k: string]: Json }
type JsonObject = { [k: string]: Json }

const isObject = (v: Json | undefined): v is JsonObject =>
  typeof v === "object" && v !== null && !Array.isArray(v)

/** Objects merge key by key; anything else replaces; null deletes the key. */
const merge = (base: JsonObject, over: JsonObject): JsonObject => {
  const out: JsonObject = { ...base }
  for (const [k, v] of Object.entries(over)) {
    const current = out[k]
    if (v === null) delete out[k]
    else if (isObject(v) && isObject(current)) out[k] = merge(current, v)
    else out[k] = v
  }
  return out
}

const leaves = (value: JsonObject, prefix = ""): Map<string, string> => {
  const out = new Map<string, string>()
  for (const [k, v] of Object.entries(value)) {
    const path = prefix === "" ? k : `${prefix}.${k}`
    if (isObject(v)) for (const [p, x] of leaves(v, path)) out.set(p, x)
    else out.set(path, JSON.stringify(v))
  }
  return out
}

const defaultsFor = (rng: Rng): JsonObject => ({
  service: {
    name: `${rng.pick(ADJECTIVES)}-${rng.pick(NOUNS)}`,
    region: rng.pick(REGIONS),
    replicas: rng.int(1, 4),
  },
  server: {
    host: "0.0.0.0",
    port: rng.int(8000, 8999),
    tls: { enabled: false, cert: `/etc/ssl/${rng.pick(NOUNS)}.pem`, min_version: "1.2" },
  },
  database: {
    url: `postgres://db.${rng.pick(NOUNS)}.internal:5432/app`,
    pool: { min: rng.int(1, 4), max: rng.int(10, 40), idle_seconds: rng.int(30, 300) },
    read_only: false,
  },
  logging: { level: "info", format: "text", targets: ["stdout"] },
  features: { flags: rng.sample(NOUNS, 3), beta: false },
})

/** Leaf edits an override file can make. */
type Edit = readonly [path: ReadonlyArray<string>, value: Json]

const setPath = (target: JsonObject, path: ReadonlyArray<string>, value: Json) => {
  let node = target
  for (const key of path.slice(0, -1)) {
    const next = node[key]
    if (isObject(next)) node = next
    else {
      const created: JsonObject = {}
      node[key] = created
      node = created
    }
  }
  node[path[path.length - 1] as string] = value
}

const overrideFor = (edits: ReadonlyArray<Edit>): JsonObject => {
  const out: JsonObject = {}
  for (const [path, value] of edits) setPath(out, path, value)
  return out
}

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const medium = difficulty !== "easy"
  const hard = difficulty === "hard"
  const defaults = defaultsFor(rng)
  const changes: ReadonlyArray<Edit> = [
    [["server", "port"], rng.int(9000, 9999)],
    [["server", "tls", "enabled"], true],
    [["database", "pool", "max"], rng.int(50, 99)],
    [["logging", "level"], rng.pick(["debug", "warn"])],
    [
      ["logging", "targets"],
      ["stdout", `/var/log/${rng.pick(NOUNS)}.log`],
    ],
    [["service", "replicas"], rng.int(5, 9)],
    [["features", "flags"], rng.sample(NOUNS, 2)],
  ]
  const additions: ReadonlyArray<Edit> = [
    [["server", "tls", "hsts"], true],
    [["database", "pool", "timeout_ms"], rng.int(100, 900)],
    [["cache", "url"], `redis://${rng.pick(NOUNS)}.internal:6379`],
    [["cache", "ttl"], rng.int(60, 600)],
  ]
  const deletions: ReadonlyArray<Edit> = [
    [["server", "tls", "min_version"], null],
    [["database", "read_only"], null],
    [["features", "beta"], null],
  ]
  const overrideEdits = [
    ...rng.sample(changes, medium ? 4 : 3),
    ...rng.sample(additions, medium ? 3 : 2),
    ...(medium ? rng.sample(deletions, hard ? 2 : 1) : []),
  ]
  const overrides = overrideFor(overrideEdits)
  const local: JsonObject | undefined = hard
    ? overrideFor([
        [["server", "port"], rng.int(10000, 10999)],
        [["logging", "format"], "json"],
        [
          ["service", "region"],
          rng.pick(REGIONS.filter((r) => r !== (defaults.service as JsonObject).region)),
        ],
      ])
    : undefined
  const effective =
    local === undefined ? merge(defaults, overrides) : merge(merge(defaults, overrides), local)
  const before = leaves(defaults)
  const after = leaves(effective)
  const changed = [...new Set([...before.keys(), ...after.keys()])]
    .filter((p) => before.get(p) !== after.get(p))
    .sort()

  const layers = hard
    ? "`config/defaults.json`, then `config/overrides.json`, then `config/local.json` (later files win)"
    : "`config/defaults.json` with `config/overrides.json` on top (the override wins)"
  const instruction = [
    `Merge the JSON configuration files ${layers} and write the result to \`config/effective.json\`. The rules:`,
    "",
    "- when both sides have an object under the same key, merge the two objects key by key, recursively;",
    "- any other value (number, string, boolean, array) from the later file replaces the earlier one; arrays are replaced, not concatenated;",
    ...(medium
      ? ["- a key whose value is `null` in a later file is removed from the result;"]
      : []),
    "- keys that appear on only one side are kept.",
    ...(medium
      ? [
          "",
          "Then write `config/changed.txt`: the dotted paths (like `server.tls.enabled`) of every non-object value that differs between defaults.json and effective.json — added, changed or removed — one per line, sorted alphabetically.",
        ]
      : []),
  ].join("\n")

  const solution = bashScript([
    "python3 - <<'PY'",
    "import json",
    "",
    "def merge(a, b):",
    "    out = dict(a)",
    "    for k, v in b.items():",
    "        if v is None:",
    "            out.pop(k, None)",
    "        elif isinstance(v, dict) and isinstance(out.get(k), dict):",
    "            out[k] = merge(out[k], v)",
    "        else:",
    "            out[k] = v",
    "    return out",
    "",
    "def leaves(d, prefix=''):",
    "    out = {}",
    "    for k, v in d.items():",
    "        p = f'{prefix}.{k}' if prefix else k",
    "        out.update(leaves(v, p) if isinstance(v, dict) else {p: v})",
    "    return out",
    "",
    "load = lambda name: json.load(open(f'config/{name}.json'))",
    "defaults = load('defaults')",
    "result = merge(defaults, load('overrides'))",
    ...(hard ? ["result = merge(result, load('local'))"] : []),
    "json.dump(result, open('config/effective.json', 'w'), indent=2)",
    ...(medium
      ? [
          "a, b = leaves(defaults), leaves(result)",
          "changed = sorted(p for p in set(a) | set(b) if a.get(p, ...) != b.get(p, ...))",
          "open('config/changed.txt', 'w').write(''.join(p + '\\n' for p in changed))",
        ]
      : []),
    "PY",
  ])

  const sections = Object.keys(effective).sort()
  const helpers = [
    `WANT = ${py(effective as PyValue)}`,
    "",
    "",
    "def effective():",
    '    return json.loads((APP / "config" / "effective.json").read_text())',
  ]
  const arrayPaths = overrideEdits.filter(([, v]) => Array.isArray(v)).map(([p]) => p)
  const tests: Array<TestCase> = [
    {
      name: "effective_has_the_right_sections",
      doc: "config/effective.json is an object with the merged top-level keys",
      body: [
        "got = effective()",
        "assert isinstance(got, dict)",
        `assert sorted(got) == ${py(sections)}`,
      ],
    },
    ...sections.map((s) => ({
      name: `section_${s}`,
      doc: `the ${s} section is merged correctly`,
      body: [`assert effective().get(${py(s)}) == WANT[${py(s)}]`],
    })),
  ]
  if (arrayPaths.length > 0)
    tests.push({
      name: "arrays_are_replaced",
      doc: "arrays from the override replace the default arrays instead of being concatenated",
      body: [
        "got = effective()",
        ...arrayPaths.map(
          (p) =>
            `assert got${p.map((k) => `[${py(k)}]`).join("")} == WANT${p.map((k) => `[${py(k)}]`).join("")}`,
        ),
      ],
    })
  if (medium) {
    const removed = overrideEdits.filter(([, v]) => v === null).map(([p]) => p)
    tests.push(
      {
        name: "null_removes_keys",
        doc: "keys set to null in the override are absent from the result",
        body: [
          "got = effective()",
          ...removed.map(
            (p) =>
              `assert ${py(p[p.length - 1] as string)} not in got${p
                .slice(0, -1)
                .map((k) => `[${py(k)}]`)
                .join("")}`,
          ),
        ],
      },
      {
        name: "changed_paths",
        doc: "config/changed.txt lists the dotted paths that differ from the defaults",
        body: [
          'lines = [l.strip() for l in (APP / "config" / "changed.txt").read_text().splitlines() if l.strip()]',
          `assert lines == ${py(changed)}`,
        ],
      },
    )
  }
  if (hard)
    tests.push({
      name: "local_wins_over_overrides",
      doc: "values from config/local.json win over config/overrides.json",
      body: [
        "got = effective()",
        'assert got["server"]["port"] == WANT["server"]["port"]',
        'assert got["service"]["region"] == WANT["service"]["region"]',
        'assert got["logging"]["format"] == "json"',
      ],
    })
  const file = (name: string, value: JsonObject) => ({
    path: `config/${name}.json`,
    content: `${JSON.stringify(value, null, 2)}\n`,
  })
  return {
    instruction,
    setup: bashScript(
      createFiles([
        file("defaults", defaults),
        file("overrides", overrides),
        ...(local === undefined ? [] : [file("local", local)]),
      ]),
    ),
    solution,
    ...pytestFile(tests, helpers),
  }
}

export const jsonMerge: TaskFamily = {
  name: "json-merge",
  summary:
    "deep-merge layered JSON configs (objects merge, arrays replace, null deletes); list changed paths",
  tags: ["json", "python", "config"],
  generate,
}
