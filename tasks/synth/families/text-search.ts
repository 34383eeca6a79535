import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles } from "../shell.ts"
import { ADJECTIVES, NOUNS, VERBS } from "../vocabulary.ts"

const SIZES = {
  easy: { files: 3, lines: [5, 8] },
  medium: { files: 5, lines: [6, 10] },
  hard: { files: 7, lines: [6, 12] },
} as const

const capitalize = (w: string) => `${w.charAt(0).toUpperCase()}${w.slice(1)}`

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const size = SIZES[difficulty]
  const word = rng.pick(NOUNS)
  const fillers = [...NOUNS, ...ADJECTIVES, ...VERBS, "the", "a", "near", "with", "and"].filter(
    (w) => !w.includes(word) && !word.includes(w),
  )
  const sentence = (withWord: string | undefined): string => {
    const words = Array.from({ length: rng.int(4, 8) }, () => rng.pick(fillers))
    if (withWord !== undefined) words.splice(rng.int(0, words.length), 0, withWord)
    const text = words.join(" ")
    return rng.chance(0.3) ? `${text}.` : text
  }
  const variants =
    difficulty === "easy" ? [word] : [word, word, capitalize(word), word.toUpperCase()]
  const traps = [`${word}s`, `sub${word}`, `${word}_id`, `${word}2`]
  const matches = (line: string): boolean => {
    if (difficulty === "easy") return line.includes(word)
    if (difficulty === "medium") return line.toLowerCase().includes(word)
    if (line.startsWith("#")) return false
    return new RegExp(`(^|[^A-Za-z0-9_])${word}([^A-Za-z0-9_]|$)`, "i").test(line)
  }

  const names = rng
    .sample(
      NOUNS.filter((n) => n !== word),
      size.files,
    )
    .map((n) => `${n}.txt`)
  // At least one file without a match, at least two with.
  const silent = new Set(rng.sample(names, difficulty === "easy" ? 1 : 2))
  const docs = names.map((name, fileIndex) => {
    const count = rng.int(size.lines[0], size.lines[1])
    const lines = Array.from({ length: count }, () => {
      if (silent.has(name)) return sentence(undefined)
      const roll = rng.float()
      if (roll < 0.35) return sentence(rng.pick(variants))
      if (difficulty === "hard" && roll < 0.5) return sentence(rng.pick(traps))
      if (difficulty === "hard" && roll < 0.58) return `# ${sentence(rng.pick(variants))}`
      return sentence(undefined)
    })
    if (!silent.has(name) && !lines.some(matches))
      lines[fileIndex % lines.length] = sentence(rng.pick(variants))
    if (difficulty === "hard" && silent.has(name)) lines[0] = `# ${sentence(word)}`
    return { name, lines }
  })
  const sortedDocs = [...docs].sort((a, b) => (a.name < b.name ? -1 : 1))
  const matched = sortedDocs.flatMap((d) => d.lines.filter(matches).map((l) => `${d.name}:${l}`))
  const noMatch = sortedDocs.filter((d) => !d.lines.some(matches)).map((d) => d.name)
  const perFile = sortedDocs
    .map((d) => `${d.name} ${d.lines.filter(matches).length}`)
    .filter((l) => !l.endsWith(" 0"))

  const rule =
    difficulty === "easy"
      ? `that contain the word \`${word}\``
      : difficulty === "medium"
        ? `that contain \`${word}\`, ignoring case (\`${capitalize(word)}\` and \`${word.toUpperCase()}\` count too)`
        : `that contain the whole word \`${word}\`, ignoring case. Whole word means the match is not preceded or followed by a letter, digit or underscore, so \`${word}s\` or \`${word}_id\` do not count. Skip comment lines (lines that start with \`#\`) entirely`
  const instruction = [
    `The folder \`docs/\` contains ${names.length} text files. Find the lines ${rule}.`,
    "",
    "Write these files (in /app, not in docs/):",
    "",
    `1. \`matches.txt\`: every matching line as \`<file name>:<line>\` (the file's base name, e.g. \`${names[0]}:...\`, then the line exactly as it appears), grouped by file in byte order of the file names, and within a file in the order the lines appear.`,
    "2. `count.txt`: the number of matching lines, as a bare integer.",
    "3. `no_match.txt`: the names of the files in docs/ that have no matching line, one per line, in byte order.",
    ...(difficulty === "hard"
      ? [
          "4. `per_file.txt`: for every file with at least one matching line, `<file name> <number of matching lines>`, one per line, in byte order of the file names.",
        ]
      : []),
  ].join("\n")

  const grep =
    difficulty === "easy"
      ? `grep -F -- ${word} *.txt`
      : difficulty === "medium"
        ? `grep -i -F -- ${word} *.txt`
        : `grep -i -w -- ${word} *.txt | grep -v '^[^:]*:#'`
  const solution = bashScript([
    "cd docs",
    `{ ${grep} || true; } > ../matches.txt`,
    "wc -l < ../matches.txt | tr -d ' ' > ../count.txt",
    "ls *.txt | LC_ALL=C sort | comm -23 - <(cut -d: -f1 ../matches.txt | LC_ALL=C sort -u) > ../no_match.txt",
    ...(difficulty === "hard"
      ? ["cut -d: -f1 ../matches.txt | uniq -c | awk '{print $2, $1}' > ../per_file.txt"]
      : []),
  ])

  const helpers = [
    `MATCHES = ${py(matched)}`,
    `NO_MATCH = ${py(noMatch)}`,
    "",
    "",
    "def lines_of(name):",
    "    return [l for l in (APP / name).read_text().splitlines() if l.strip()]",
  ]
  const tests: Array<TestCase> = [
    {
      name: "matches_are_complete",
      doc: "matches.txt holds exactly the matching lines, in any order",
      body: ['assert sorted(lines_of("matches.txt")) == sorted(MATCHES)'],
    },
    {
      name: "matches_are_ordered",
      doc: "matches.txt is grouped by file name in byte order, lines in file order",
      body: ['assert lines_of("matches.txt") == MATCHES'],
    },
    {
      name: "count_is_right",
      doc: "count.txt holds the number of matching lines",
      body: ['assert (APP / "count.txt").read_text().strip() == str(len(MATCHES))'],
    },
    {
      name: "files_without_match",
      doc: "no_match.txt lists the files without a matching line",
      body: ['assert lines_of("no_match.txt") == NO_MATCH'],
    },
  ]
  if (difficulty !== "easy") {
    const mixed = matched.filter(
      (l) =>
        /[A-Z]/.test(l.slice(l.indexOf(":"))) &&
        l.toLowerCase().includes(word) &&
        !l.includes(word),
    )
    if (mixed.length > 0)
      tests.push({
        name: "case_variants_are_found",
        doc: "lines with the word in capitals are among the matches",
        body: [
          `want = ${py(mixed)}`,
          'got = set(lines_of("matches.txt"))',
          "assert all(l in got for l in want)",
        ],
      })
  }
  if (difficulty === "hard") {
    const trapLines = sortedDocs.flatMap((d) =>
      d.lines
        .filter((l) => !matches(l) && l.toLowerCase().includes(word))
        .map((l) => `${d.name}:${l}`),
    )
    tests.push(
      {
        name: "partial_words_and_comments_are_skipped",
        doc: "lines where the word is only part of a longer word, or commented out, are not matches",
        body: [
          `skipped = ${py(trapLines)}`,
          'got = set(lines_of("matches.txt"))',
          "assert len(got) > 0",
          "assert not any(l in got for l in skipped)",
        ],
      },
      {
        name: "per_file_counts",
        doc: "per_file.txt gives the number of matching lines of each file",
        body: [`assert lines_of("per_file.txt") == ${py(perFile)}`],
      },
    )
  }
  return {
    instruction,
    setup: bashScript(
      createFiles(
        docs.map((d) => ({ path: `docs/${d.name}`, content: `${d.lines.join("\n")}\n` })),
      ),
    ),
    solution,
    ...pytestFile(tests, helpers),
  }
}

export const textSearch: TaskFamily = {
  name: "text-search",
  summary: "grep lines for a word across files (case, whole words, comments); counts per file",
  tags: ["text", "grep", "wc", "bash"],
  generate,
}
