import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles } from "../shell.ts"
import { ADJECTIVES, NOUNS } from "../vocabulary.ts"

const SIZES = {
  easy: { vocabulary: 8, top: 3 },
  medium: { vocabulary: 15, top: 5 },
  hard: { vocabulary: 24, top: 6 },
} as const

const STOPWORDS = ["the", "and", "of", "to", "in", "is", "it", "on"] as const
const PUNCTUATION = [",", ".", ";", ":", "!", "?"] as const

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const size = SIZES[difficulty]
  const hard = difficulty === "hard"
  const vocabulary = rng.sample([...new Set([...NOUNS, ...ADJECTIVES])], size.vocabulary)
  // Counts: the top K are well separated from the rest; medium and hard plant a tie inside the
  // top K so the alphabetical tie-break matters.
  const counts = new Map<string, number>()
  let next = rng.int(14, 20)
  vocabulary.forEach((w, i) => {
    if (i === size.top) next -= rng.int(2, 3)
    else if (i > 0 && !(difficulty !== "easy" && i === 2)) next -= rng.int(1, 2)
    counts.set(w, Math.max(next, 1))
  })
  const stopwords: ReadonlyArray<string> = hard ? rng.sample(STOPWORDS, 4) : []
  for (const s of stopwords) counts.set(s, rng.int(22, 30))

  const tokens = rng.shuffle([...counts.entries()].flatMap(([w, n]) => Array<string>(n).fill(w)))
  const lines: Array<string> = []
  for (let at = 0; at < tokens.length; ) {
    const take = rng.int(5, 11)
    const words = tokens.slice(at, at + take).map((w) => {
      if (difficulty === "easy") return w
      let out = rng.chance(0.2) ? `${w.charAt(0).toUpperCase()}${w.slice(1)}` : w
      if (rng.chance(0.15)) out = `${out}${rng.pick(PUNCTUATION)}`
      return out
    })
    lines.push(words.join(" "))
    at += take
  }

  const ranked = [...counts.entries()]
    .filter(([w]) => !stopwords.includes(w))
    .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1))
    .slice(0, size.top)
    .map(([w, n]) => `${n} ${w}`)
  const stats = {
    lines: lines.length,
    words: tokens.length,
    unique: counts.size,
  }

  const instruction = [
    "`corpus.txt` is a small text corpus. A word is a maximal run of the letters a–z, compared case-insensitively" +
      (difficulty === "easy"
        ? "."
        : " (so `River,` and `river` are the same word; punctuation is not part of a word)."),
    "",
    `1. Write \`top.txt\` with the ${size.top} most frequent words${hard ? ", leaving out the stop words listed in `stopwords.txt` (one per line)" : ""}: one line per word as \`<count> <word>\` (word in lower case, one space between), most frequent first; words with equal counts in alphabetical order.`,
    `2. Write \`stats.txt\` with exactly three lines, \`lines=<N>\`, \`words=<N>\` and \`unique=<N>\`: the number of lines in corpus.txt, the total number of words, and the number of distinct words${hard ? " (stop words included in all three)" : ""}.`,
  ].join("\n")

  const solution = bashScript([
    "export LC_ALL=C",
    "tr 'A-Z' 'a-z' < corpus.txt | tr -cs 'a-z' '\\n' | sed '/^$/d' > /tmp/words.txt",
    hard
      ? "{ grep -v -x -F -f stopwords.txt /tmp/words.txt || true; } > /tmp/kept.txt"
      : "cp /tmp/words.txt /tmp/kept.txt",
    `sort /tmp/kept.txt | uniq -c | sort -k1,1nr -k2,2 | awk 'NR <= ${size.top} {print $1, $2}' > top.txt`,
    "{",
    '  echo "lines=$(wc -l < corpus.txt)"',
    '  echo "words=$(wc -l < /tmp/words.txt)"',
    '  echo "unique=$(sort -u /tmp/words.txt | wc -l)"',
    "} > stats.txt",
  ])

  const helpers = [
    `TOP = ${py(ranked)}`,
    `STATS = ${py(stats)}`,
    "",
    "",
    "def top_lines():",
    '    return [" ".join(l.split()) for l in (APP / "top.txt").read_text().splitlines() if l.strip()]',
    "",
    "",
    "def stat(key):",
    '    for line in (APP / "stats.txt").read_text().splitlines():',
    '        k, _, v = line.strip().partition("=")',
    "        if k.strip() == key:",
    "            return int(v.strip())",
    '    raise AssertionError(f"no {key}= line")',
  ]
  const tests: Array<TestCase> = [
    {
      name: "top_has_the_right_words",
      doc: `top.txt names the ${size.top} most frequent words`,
      body: [
        "got = {l.split()[-1] for l in top_lines()}",
        "assert got == {l.split()[1] for l in TOP}",
      ],
    },
    {
      name: "top_counts_are_right",
      doc: "each line of top.txt has the word's true count",
      body: [
        "want = {l.split()[1]: l.split()[0] for l in TOP}",
        "got = top_lines()",
        "assert len(got) > 0",
        "for line in got:",
        "    count, word = line.split()",
        "    assert want.get(word) == count, line",
      ],
    },
    {
      name: "top_is_ordered",
      doc: "top.txt is most frequent first, ties alphabetical, in the `<count> <word>` form",
      body: ["assert top_lines() == TOP"],
    },
    {
      name: "stats_lines",
      doc: "stats.txt has the number of lines",
      body: ['assert stat("lines") == STATS["lines"]'],
    },
    {
      name: "stats_words",
      doc: "stats.txt has the number of words",
      body: ['assert stat("words") == STATS["words"]'],
    },
    {
      name: "stats_unique",
      doc: "stats.txt has the number of distinct words",
      body: ['assert stat("unique") == STATS["unique"]'],
    },
    ...(hard
      ? [
          {
            name: "stopwords_are_left_out",
            doc: "no stop word appears in top.txt",
            body: [
              `stop = ${py(stopwords)}`,
              "got = top_lines()",
              "assert len(got) > 0",
              "assert not any(l.split()[-1] in stop for l in got)",
            ],
          },
        ]
      : []),
  ]
  return {
    instruction,
    setup: bashScript(
      createFiles([
        { path: "corpus.txt", content: `${lines.join("\n")}\n` },
        ...(hard ? [{ path: "stopwords.txt", content: `${stopwords.join("\n")}\n` }] : []),
      ]),
    ),
    solution,
    ...pytestFile(tests, helpers),
  }
}

export const wordFrequency: TaskFamily = {
  name: "word-frequency",
  summary: "top-K word counts with tie-breaks and stop words (tr, sort, uniq -c) plus wc stats",
  tags: ["text", "sort", "uniq", "wc", "tr"],
  generate,
}
