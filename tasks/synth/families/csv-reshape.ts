import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles } from "../shell.ts"
import { DEPARTMENTS, FIRST_NAMES, LAST_NAMES } from "../vocabulary.ts"

const SIZES = { easy: 12, medium: 20, hard: 30 } as const
const COLUMNS = [
  "id",
  "first_name",
  "last_name",
  "email",
  "department",
  "salary",
  "start_date",
] as const
type Column = (typeof COLUMNS)[number]
type Person = Record<Column, string>

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const easy = difficulty === "easy"
  const hard = difficulty === "hard"
  const delimiter = hard ? ";" : ","
  const departments = rng.sample(DEPARTMENTS, 3)
  const target = departments[0] as string
  const names = new Set<string>()
  const salaries = new Set<number>()
  const people: Array<Person> = []
  let id = rng.int(100, 400)
  while (people.length < SIZES[difficulty]) {
    const first = rng.pick(FIRST_NAMES)
    const last = rng.pick(LAST_NAMES)
    const salary = rng.int(80, 360) * 500
    if (names.has(`${first}.${last}`) || salaries.has(salary)) continue
    names.add(`${first}.${last}`)
    salaries.add(salary)
    id += rng.int(1, 9)
    const email = `${first}.${last}@corp.example`
    people.push({
      id: String(id),
      first_name: first,
      last_name: last,
      email:
        hard && rng.chance(0.4) ? email.replace(/^./, (c) => c.toUpperCase()).toUpperCase() : email,
      department: people.length < 4 ? target : rng.pick(departments),
      salary: String(salary),
      start_date: `20${rng.int(10, 24)}-${String(rng.int(1, 12)).padStart(2, "0")}-${String(rng.int(1, 28)).padStart(2, "0")}`,
    })
  }
  const inTarget = people
    .filter((p) => p.department === target)
    .map((p) => Number(p.salary))
    .sort((a, b) => a - b)
  const threshold = easy ? 0 : (inTarget[Math.floor(inTarget.length / 3)] as number)
  const inputOrder = rng.shuffle(COLUMNS)
  const rows = hard ? [...people, ...rng.sample(people, 3)] : people
  const input = [
    inputOrder.join(delimiter),
    ...rng.shuffle(rows).map((p) => inputOrder.map((c) => p[c]).join(delimiter)),
  ]

  const outColumns = rng.pick([
    ["last_name", "first_name", "email", "salary"],
    ["email", "last_name", "salary"],
    ["first_name", "email", "salary", "start_date"],
    ["salary", "email", "first_name"],
  ] as const)
  const header = outColumns.map((c) => (c === "salary" && !easy ? "annual_salary" : c))
  const firstSeen = new Map<string, number>()
  input.slice(1).forEach((line, i) => {
    const idAt = inputOrder.indexOf("id")
    const rowId = line.split(delimiter)[idAt] as string
    if (!firstSeen.has(rowId)) firstSeen.set(rowId, i)
  })
  const selected = people
    .filter((p) => p.department === target && Number(p.salary) >= threshold)
    .sort((a, b) =>
      easy
        ? (firstSeen.get(a.id) as number) - (firstSeen.get(b.id) as number)
        : Number(b.salary) - Number(a.salary) || (a.last_name < b.last_name ? -1 : 1),
    )
  const outRows = selected.map((p) =>
    outColumns.map((c) => (c === "email" ? p.email.toLowerCase() : p[c])),
  )
  const outFile = `out/${target}.csv`

  const instruction = [
    `\`people.csv\` is a staff list${hard ? " whose fields are separated by semicolons (`;`), not commas" : ""}. Its first line is a header naming the columns; do not assume any particular column order.`,
    "",
    `Write \`${outFile}\` (create the folder) as a comma-separated file:`,
    "",
    `- only people in the \`${target}\` department${easy ? "" : ` whose salary is at least ${threshold}`};`,
    `- the columns ${outColumns.map((c) => `\`${c}\``).join(", ")}, in that order, with the header line \`${header.join(",")}\`${easy ? "" : " (note that `salary` is renamed to `annual_salary`)"};`,
    easy
      ? "- rows in the same order as in people.csv."
      : "- rows ordered by salary, highest first (ties by last_name, alphabetically).",
    ...(hard
      ? [
          "- some people are listed more than once (same id): include each person only once;",
          "- write email addresses in lower case.",
        ]
      : []),
  ].join("\n")

  const solution = bashScript([
    "mkdir -p out",
    "python3 - <<'PY'",
    "import csv",
    "",
    `with open("people.csv", newline="") as f:`,
    `    people = list(csv.DictReader(f, delimiter=${py(delimiter)}))`,
    "seen, rows = set(), []",
    "for p in people:",
    `    if p["id"] in seen or p["department"] != ${py(target)} or int(p["salary"]) < ${threshold}:`,
    "        continue",
    '    seen.add(p["id"])',
    '    p["email"] = p["email"].lower()',
    "    rows.append(p)",
    ...(easy ? [] : ['rows.sort(key=lambda p: (-int(p["salary"]), p["last_name"]))']),
    `with open(${py(outFile)}, "w", newline="") as f:`,
    '    w = csv.writer(f, lineterminator="\\n")',
    `    w.writerow(${py(header)})`,
    "    for p in rows:",
    `        w.writerow([p[c] for c in ${py([...outColumns])}])`,
    "PY",
  ])

  // Every column choice includes email, the unique key the tests match rows by.
  const keyAt = outColumns.indexOf("email" as never)
  const helpers = [
    "import csv",
    "",
    `OUT = APP / ${py(outFile)}`,
    `HEADER = ${py(header)}`,
    `ROWS = ${py(outRows)}`,
    `KEY = ${keyAt}`,
    "",
    "",
    "def table():",
    '    with open(OUT, newline="") as f:',
    "        return [[c.strip() for c in r] for r in csv.reader(f) if r]",
  ]
  const tests: Array<TestCase> = [
    {
      name: "header",
      doc: `${outFile} has the requested header`,
      body: ["assert table()[0] == HEADER"],
    },
    {
      name: "right_people_selected",
      doc: "exactly the requested people are in the output",
      body: [
        "got = sorted(r[KEY].lower() for r in table()[1:])",
        "assert got == sorted(r[KEY].lower() for r in ROWS)",
      ],
    },
    {
      name: "column_values",
      doc: "each row carries the right values in the requested column order",
      body: [
        "want = {r[KEY].lower(): r for r in ROWS}",
        "got = table()[1:]",
        "assert len(got) > 0",
        "for r in got:",
        "    assert [c.lower() for c in r] == [c.lower() for c in want.get(r[KEY].lower(), [])], r",
      ],
    },
    {
      name: "row_order",
      doc: easy ? "rows keep the input order" : "rows are ordered by salary, highest first",
      body: ["assert [r[KEY].lower() for r in table()[1:]] == [r[KEY].lower() for r in ROWS]"],
    },
  ]
  if (!easy)
    tests.push({
      name: "salary_threshold",
      doc: `no row has a salary below ${threshold}`,
      body: [
        "header, *body = table()",
        'at = header.index("annual_salary")',
        "assert len(body) > 0",
        `assert all(int(r[at]) >= ${threshold} for r in body)`,
      ],
    })
  if (hard)
    tests.push(
      {
        name: "no_duplicates",
        doc: "each person appears once",
        body: [
          "keys = [r[KEY].lower() for r in table()[1:]]",
          "assert len(keys) > 0",
          "assert len(keys) == len(set(keys))",
        ],
      },
      {
        name: "comma_separated",
        doc: "the output uses commas, not semicolons",
        body: [
          "text = OUT.read_text()",
          'assert ";" not in text',
          'assert text.splitlines()[0] == ",".join(HEADER)',
        ],
      },
    )
  if (hard)
    tests.push({
      name: "emails_lower_case",
      doc: "email addresses are written in lower case",
      body: [
        "emails = [r[KEY] for r in table()[1:]]",
        "assert len(emails) > 0",
        "assert all(e == e.lower() for e in emails)",
      ],
    })
  return {
    instruction,
    setup: bashScript(createFiles([{ path: "people.csv", content: `${input.join("\n")}\n` }])),
    solution,
    ...pytestFile(tests, helpers),
  }
}

export const csvReshape: TaskFamily = {
  name: "csv-reshape",
  summary: "select, filter, rename, reorder and sort CSV columns; semicolons, duplicates, case",
  tags: ["csv", "python", "sort", "filter"],
  generate,
}
