import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles, type FileSpec } from "../shell.ts"
import { ADJECTIVES, NOUNS, VERBS } from "../vocabulary.ts"

/**
 * Write a small command-line tool with a given behaviour; the tests run it on inputs the agent
 * never saw. Three tools (chosen by the rng), each harder with more options and error handling.
 */
interface Tool {
  readonly name: string
  readonly instruction: string
  readonly example: string
  readonly script: string
  readonly helpers: ReadonlyArray<string>
  readonly tests: ReadonlyArray<TestCase>
  /** Extra input files for the agent to try the tool on. */
  readonly inputs?: ReadonlyArray<FileSpec>
}

const RUN_HELPERS = (name: string) => [
  `TOOL = APP / "bin" / ${py(name)}`,
  "",
  "",
  'def run(*args, stdin=""):',
  "    return subprocess.run([str(TOOL), *map(str, args)], input=stdin, capture_output=True, text=True, timeout=10)",
  "",
  "",
  'def out(*args, stdin=""):',
  "    r = run(*args, stdin=stdin)",
  "    assert r.returncode == 0, r.stderr",
  '    return r.stdout.rstrip("\\n")',
]

const usageTests = (calls: ReadonlyArray<ReadonlyArray<string>>, code: number): TestCase => ({
  name: "bad_arguments_exit_with_usage",
  doc: `bad arguments print a usage line on stderr and exit with status ${code}`,
  body: [
    `for args in ${py(calls.map((c) => [...c]))}:`,
    "    r = run(*args)",
    `    assert r.returncode == ${code}, args`,
    '    assert "usage" in r.stderr.lower(), args',
    '    assert r.stdout == "", args',
  ],
})

const seqwords = (rng: Rng, difficulty: Difficulty): Tool => {
  const name = rng.pick(["fizzle", "seqwords", "countoff", "chime"])
  const [a, b] = rng.pick([
    [2, 3],
    [3, 5],
    [2, 5],
    [3, 4],
    [4, 5],
    [3, 7],
  ] as const)
  const [wa, wb] = rng.sample(NOUNS, 2) as [string, string]
  const medium = difficulty !== "easy"
  const hard = difficulty === "hard"
  const expected = (n: number, start = 1) => {
    const out: Array<string> = []
    for (let i = start; i <= n; i++)
      out.push(`${i % a === 0 ? wa : ""}${i % b === 0 ? wb : ""}` || String(i))
    return out.join("\n")
  }
  const n1 = rng.int(a * b, a * b + 6)
  const n2 = rng.int(a * b * 2, a * b * 3)
  const start = rng.int(a * b - 3, a * b - 1)
  const tests: Array<TestCase> = [
    {
      name: "counts_to_n",
      doc: `prints 1..N with multiples of ${a} and ${b} replaced`,
      body: [`assert out(${n1}) == ${py(expected(n1))}`],
    },
    {
      name: "longer_run",
      doc: "works for a larger N",
      body: [`assert out(${n2}) == ${py(expected(n2))}`],
    },
    {
      name: "multiples_of_both",
      doc: `a multiple of both ${a} and ${b} prints ${wa}${wb}`,
      body: [
        `lines = out(${a * b}).splitlines()`,
        `assert lines[-1] == ${py(wa + wb)}`,
        `assert len(lines) == ${a * b}`,
      ],
    },
  ]
  if (medium)
    tests.push({
      name: "optional_start",
      doc: "a second argument sets the first number",
      body: [`assert out(${n1}, ${start}) == ${py(expected(n1, start))}`],
    })
  if (hard)
    tests.push(usageTests([[], ["abc"], ["5", "x"], ["1", "2", "3"]], 2), {
      name: "zero_prints_nothing",
      doc: "N = 0 prints nothing and succeeds",
      body: ['assert out(0) == ""'],
    })
  const script = [
    "#!/usr/bin/env bash",
    `usage() { echo "usage: ${name} N${medium ? " [START]" : ""}" >&2; exit 2; }`,
    `[ $# -ge 1 ] && [ $# -le ${medium ? 2 : 1} ] || usage`,
    "[[ $1 =~ ^[0-9]+$ ]] || usage",
    `start="\${2:-1}"`,
    "[[ $start =~ ^[0-9]+$ ]] || usage",
    "for ((i = start; i <= $1; i++)); do",
    '  out=""',
    `  if (( i % ${a} == 0 )); then out+=${wa}; fi`,
    `  if (( i % ${b} == 0 )); then out+=${wb}; fi`,
    `  echo "\${out:-$i}"`,
    "done",
  ].join("\n")
  return {
    name,
    instruction: [
      `Write a command-line tool \`bin/${name}\` (any language available here; it must be executable and start with a \`#!\` line) that takes a number N and prints the numbers from 1 to N, one per line — except that multiples of ${a} print \`${wa}\` instead, multiples of ${b} print \`${wb}\`, and multiples of both print \`${wa}${wb}\`.`,
      ...(medium
        ? [
            `An optional second argument START makes it count from START instead of 1 (\`${name} N START\`).`,
          ]
        : []),
      ...(hard
        ? [
            `If it is called with no arguments, too many arguments, or an argument that is not a non-negative integer, it must print a line starting with \`usage:\` to stderr, print nothing to stdout, and exit with status 2. \`${name} 0\` prints nothing and succeeds.`,
          ]
        : []),
    ].join("\n"),
    example: `$ bin/${name} ${a * b}\n${expected(a * b)}\n`,
    script,
    helpers: RUN_HELPERS(name),
    tests,
  }
}

const shiftText = (text: string, k: number) =>
  text.replace(/[a-zA-Z]/g, (c) => {
    const base = c <= "Z" ? 65 : 97
    return String.fromCharCode(base + ((((c.charCodeAt(0) - base + k) % 26) + 26) % 26))
  })

const caesar = (rng: Rng, difficulty: Difficulty): Tool => {
  const name = rng.pick(["rot", "shift", "caesar", "scramble"])
  const medium = difficulty !== "easy"
  const hard = difficulty === "hard"
  const sentence = () => {
    const words = Array.from({ length: rng.int(4, 8) }, () =>
      rng.pick([...NOUNS, ...ADJECTIVES, ...VERBS]),
    )
    words[0] = `${(words[0] as string).charAt(0).toUpperCase()}${(words[0] as string).slice(1)}`
    return `${words.join(" ")}${rng.pick([".", "!", "?", ", 42."])}`
  }
  const text1 = `${sentence()}\n${sentence()}\n`
  const text2 = `${sentence()} ${rng.int(100, 999)}\n`
  const k1 = rng.int(1, 25)
  const k2 = medium ? -rng.int(1, 25) : rng.int(1, 25)
  const k3 = rng.int(27, 60)
  const tests: Array<TestCase> = [
    {
      name: "shifts_letters",
      doc: `shifts letters by ${k1}, keeping case`,
      body: [
        `assert out(${k1}, stdin=${py(text1)}) == ${py(shiftText(text1, k1).replace(/\n$/, ""))}`,
      ],
    },
    {
      name: "keeps_other_characters",
      doc: "digits, spaces and punctuation pass through unchanged",
      body: [
        `assert out(${k1}, stdin=${py(text2)}) == ${py(shiftText(text2, k1).replace(/\n$/, ""))}`,
      ],
    },
    {
      name: "wraps_around",
      doc: "z wraps around to a",
      body: [`assert out(1, stdin="xyz XYZ\\n") == "yza YZA"`],
    },
  ]
  if (medium)
    tests.push({
      name: "negative_and_large_shifts",
      doc: "negative shifts go backwards and shifts beyond 26 wrap",
      body: [
        `assert out(${k2}, stdin=${py(text1)}) == ${py(shiftText(text1, k2).replace(/\n$/, ""))}`,
        `assert out(${k3}, stdin=${py(text2)}) == ${py(shiftText(text2, k3).replace(/\n$/, ""))}`,
      ],
    })
  if (hard)
    tests.push(
      {
        name: "decode_flag",
        doc: "-d SHIFT undoes the shift",
        body: [
          `assert out("-d", ${k1}, stdin=${py(shiftText(text1, k1))}) == ${py(text1.replace(/\n$/, ""))}`,
        ],
      },
      usageTests([[], ["x"], ["-d"], ["1", "2"]], 2),
    )
  const script = [
    "#!/usr/bin/env python3",
    "import re",
    "import sys",
    "",
    "args = sys.argv[1:]",
    'decode = bool(args) and args[0] == "-d"',
    "if decode:",
    "    args = args[1:]",
    'if len(args) != 1 or not re.fullmatch(r"-?\\d+", args[0]):',
    `    print("usage: ${name} ${hard ? "[-d] " : ""}SHIFT", file=sys.stderr)`,
    "    sys.exit(2)",
    "k = int(args[0]) * (-1 if decode else 1)",
    "",
    "def shift(c):",
    "    for base in (ord('a'), ord('A')):",
    "        if base <= ord(c) < base + 26:",
    "            return chr(base + (ord(c) - base + k) % 26)",
    "    return c",
    "",
    'sys.stdout.write("".join(shift(c) if c.isascii() else c for c in sys.stdin.read()))',
  ].join("\n")
  return {
    name,
    instruction: [
      `Write a command-line tool \`bin/${name}\` (any language available here; it must be executable and start with a \`#!\` line) that applies a Caesar shift: \`${name} SHIFT\` reads text on stdin and writes it to stdout with every ASCII letter moved SHIFT places forward in the alphabet, wrapping from z to a, keeping upper and lower case. Every other character is copied unchanged.`,
      ...(medium ? ["SHIFT may be negative (shift backwards) or larger than 26."] : []),
      ...(hard
        ? [
            `\`${name} -d SHIFT\` decodes, i.e. shifts backwards. Called with a missing or non-integer SHIFT, or with extra arguments, it must print a line starting with \`usage:\` to stderr, print nothing to stdout and exit with status 2.`,
          ]
        : []),
    ].join("\n"),
    example: `$ echo 'Hello, World!' | bin/${name} 3\n${shiftText("Hello, World!", 3)}\n`,
    script,
    helpers: RUN_HELPERS(name),
    tests,
  }
}

const colsum = (rng: Rng, difficulty: Difficulty): Tool => {
  const name = rng.pick(["colsum", "sumcol", "tally"])
  const medium = difficulty !== "easy"
  const hard = difficulty === "hard"
  const table = (rows: number, blanks: boolean) => {
    const columns = rng.sample(["price", "weight", "score", "hours", "amount", "distance"], 3)
    const data = Array.from({ length: rows }, () =>
      columns.map((_, i) =>
        blanks && i > 0 && rng.chance(0.25)
          ? ""
          : `${rng.int(0, 500)}.${String(rng.int(0, 99)).padStart(2, "0")}`,
      ),
    )
    return { columns, data }
  }
  const cents = (v: string) => Math.round(Number(v) * 100)
  const fmt = (c: number) =>
    `${c < 0 ? "-" : ""}${Math.floor(Math.abs(c) / 100)}.${String(Math.abs(c) % 100).padStart(2, "0")}`
  const csvOf = (t: {
    columns: ReadonlyArray<string>
    data: ReadonlyArray<ReadonlyArray<string>>
  }) => `${t.columns.join(",")}\n${t.data.map((r) => r.join(",")).join("\n")}\n`
  const column = (
    t: { columns: ReadonlyArray<string>; data: ReadonlyArray<ReadonlyArray<string>> },
    i: number,
  ) => t.data.map((r) => r[i] as string).filter((v) => v !== "")
  const sum = (values: ReadonlyArray<string>) => fmt(values.reduce((s, v) => s + cents(v), 0))
  /** The mean, rounded half away from zero; tables whose mean is exactly half a cent are redrawn. */
  const mean = (values: ReadonlyArray<string>) => {
    const total = values.reduce((s, v) => s + cents(v), 0)
    return fmt(Math.round(total / values.length))
  }
  const halfCent = (values: ReadonlyArray<string>) =>
    (values.reduce((s, v) => s + cents(v), 0) * 2) % (2 * values.length) === values.length
  let t1 = table(rng.int(5, 9), medium)
  while (t1.columns.some((_, i) => halfCent(column(t1, i)))) t1 = table(rng.int(5, 9), medium)
  const t2 = table(rng.int(10, 15), false)
  const sample = table(4, false)
  const whole = [rng.int(1, 400), rng.int(1, 400)]
  const tests: Array<TestCase> = [
    {
      name: "sums_a_column",
      doc: "prints the sum of the named column with two decimals",
      body: [
        `path = write(${py(csvOf(t1))})`,
        `assert out(path, ${py(t1.columns[0] as string)}) == ${py(sum(column(t1, 0)))}`,
      ],
    },
    {
      name: "finds_columns_by_name",
      doc: "the column is found by its header name, wherever it is",
      body: [
        `path = write(${py(csvOf(t2))})`,
        `assert out(path, ${py(t2.columns[2] as string)}) == ${py(sum(column(t2, 2)))}`,
        `assert out(path, ${py(t2.columns[1] as string)}) == ${py(sum(column(t2, 1)))}`,
      ],
    },
    {
      name: "whole_numbers_get_two_decimals",
      doc: "a column of whole numbers still prints two decimals",
      body: [
        `path = write(${py(`n,${t1.columns[0]}\n1,${whole[0]}\n2,${whole[1]}\n`)})`,
        `assert out(path, ${py(t1.columns[0] as string)}) == ${py(`${(whole[0] as number) + (whole[1] as number)}.00`)}`,
      ],
    },
  ]
  if (medium)
    tests.push(
      {
        name: "skips_empty_cells",
        doc: "empty cells are skipped",
        body: [
          `path = write(${py(csvOf(t1))})`,
          `assert out(path, ${py(t1.columns[1] as string)}) == ${py(sum(column(t1, 1)))}`,
        ],
      },
      {
        name: "mean_option",
        doc: "--mean prints the mean of the non-empty cells",
        body: [
          `path = write(${py(csvOf(t1))})`,
          `assert out("--mean", path, ${py(t1.columns[2] as string)}) == ${py(mean(column(t1, 2)))}`,
        ],
      },
    )
  if (hard)
    tests.push(
      {
        name: "unknown_column_fails",
        doc: "an unknown column is an error: message on stderr, exit status 1",
        body: [
          `path = write(${py(csvOf(t2))})`,
          'r = run(path, "nonexistent")',
          "assert r.returncode == 1",
          'assert r.stderr.strip() != ""',
          'assert r.stdout == ""',
        ],
      },
      {
        name: "missing_file_fails",
        doc: "a missing file is an error: message on stderr, exit status 1",
        body: [
          'r = run("/nonexistent/file.csv", "price")',
          "assert r.returncode == 1",
          'assert r.stderr.strip() != ""',
        ],
      },
      usageTests([[], ["only-one-arg"]], 2),
    )
  const script = [
    "#!/usr/bin/env python3",
    "import csv",
    "import sys",
    "",
    "args = sys.argv[1:]",
    'mean = bool(args) and args[0] == "--mean"',
    "if mean:",
    "    args = args[1:]",
    "if len(args) != 2:",
    `    print("usage: ${name} ${medium ? "[--mean] " : ""}FILE COLUMN", file=sys.stderr)`,
    "    sys.exit(2)",
    "path, column = args",
    "try:",
    "    with open(path, newline='') as f:",
    "        rows = list(csv.DictReader(f))",
    "        fields = rows[0].keys() if rows else []",
    "except OSError as e:",
    `    print(f"${name}: {e}", file=sys.stderr)`,
    "    sys.exit(1)",
    "if column not in fields:",
    `    print(f"${name}: no column {column!r}", file=sys.stderr)`,
    "    sys.exit(1)",
    "values = [round(float(r[column]) * 100) for r in rows if r[column].strip()]",
    "total = sum(values)",
    "if mean:",
    "    q, r = divmod(2 * total + len(values), 2 * len(values))",
    "    total = q",
    'print(f"{total // 100}.{total % 100:02d}")',
  ].join("\n")
  return {
    name,
    instruction: [
      `Write a command-line tool \`bin/${name}\` (any language available here; it must be executable and start with a \`#!\` line): \`${name} FILE COLUMN\` reads the CSV file FILE, whose first line is a header, and prints the sum of the values in the column named COLUMN, with exactly two decimals (e.g. \`1042.50\`). \`data/sample.csv\` is an example input.`,
      ...(medium
        ? [
            `Empty cells are skipped. With \`--mean\` before the file name (\`${name} --mean FILE COLUMN\`) it prints the mean of the non-empty cells instead, rounded to two decimals (halves round up).`,
          ]
        : []),
      ...(hard
        ? [
            "If the file cannot be read or has no such column, it prints an error message to stderr and exits with status 1. With the wrong number of arguments it prints a line starting with `usage:` to stderr and exits with status 2.",
          ]
        : []),
    ].join("\n"),
    example: `$ bin/${name} data/sample.csv ${sample.columns[0]}\n${sum(column(sample, 0))}\n`,
    script,
    helpers: [
      ...RUN_HELPERS(name),
      "",
      "",
      "def write(text):",
      "    import tempfile",
      '    fd, path = tempfile.mkstemp(suffix=".csv")',
      '    with os.fdopen(fd, "w") as f:',
      "        f.write(text)",
      "    return path",
    ],
    tests,
    inputs: [{ path: "data/sample.csv", content: csvOf(sample) }],
  }
}

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const tool = rng.pick([seqwords, caesar, colsum])(rng, difficulty)
  const tests: Array<TestCase> = [
    {
      name: "tool_is_executable",
      doc: `bin/${tool.name} exists, is executable and starts with #!`,
      body: [
        "assert TOOL.is_file()",
        "assert os.access(TOOL, os.X_OK)",
        'assert TOOL.read_bytes().startswith(b"#!")',
      ],
    },
    ...tool.tests,
  ]
  const instruction = `${tool.instruction}\n\nAn example run is in \`examples/${tool.name}.txt\`.`
  return {
    instruction,
    setup: bashScript([
      "mkdir -p bin",
      ...createFiles([
        { path: `examples/${tool.name}.txt`, content: tool.example },
        ...(tool.inputs ?? []),
      ]),
    ]),
    solution: bashScript([
      "mkdir -p bin",
      `cat > bin/${tool.name} <<'T1_TOOL'\n${tool.script}\nT1_TOOL`,
      `chmod +x bin/${tool.name}`,
    ]),
    ...pytestFile(tests, tool.helpers),
  }
}

export const scriptTool: TaskFamily = {
  name: "script-tool",
  summary:
    "write a small CLI tool (counting words, Caesar shift, CSV column sums) that hidden tests run",
  tags: ["scripting", "bash", "python", "cli"],
  generate,
}
