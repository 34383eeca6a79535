import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles, type FileSpec } from "../shell.ts"
import { ADJECTIVES, NOUNS, VERBS } from "../vocabulary.ts"

const CATEGORY_POOL = [
  { folder: "images", extensions: ["png", "jpg", "gif"] },
  { folder: "documents", extensions: ["txt", "md", "pdf"] },
  { folder: "data", extensions: ["csv", "json"] },
  { folder: "audio", extensions: ["mp3", "wav"] },
  { folder: "video", extensions: ["mp4", "mkv"] },
  { folder: "code", extensions: ["py", "sh"] },
] as const
/** Extensions that belong to no category in any task: always "other". */
const STRAY_EXTENSIONS = ["bin", "dat", "iso", "bak"] as const

const SIZES = {
  easy: { categories: 2, files: 6, empty: 0 },
  medium: { categories: 3, files: 10, empty: 2 },
  hard: { categories: 4, files: 16, empty: 3 },
} as const

interface Incoming {
  readonly path: string
  readonly name: string
  readonly folder: string
  readonly content: string
}

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const size = SIZES[difficulty]
  const hard = difficulty === "hard"
  const categories = rng.sample(CATEGORY_POOL, size.categories)
  // Extensions of the unchosen categories are "other" too: the agent must read the list.
  const otherExtensions = [
    ...STRAY_EXTENSIONS,
    ...CATEGORY_POOL.filter((c) => !categories.includes(c)).flatMap((c) => c.extensions),
  ]
  const subfolders = hard ? ["", "", "2023", "misc", "misc/old"] : [""]
  const used = new Set<string>()
  const uniqueStem = (): string => {
    for (;;) {
      const stem = hard
        ? rng.pick([
            `${rng.pick(ADJECTIVES)}_${rng.pick(NOUNS)}`,
            `${rng.pick(NOUNS)} ${rng.int(1, 99)}`,
            `${rng.pick(NOUNS).toUpperCase()}-${rng.int(100, 999)}`,
          ])
        : `${rng.pick(NOUNS)}_${rng.int(1, 99)}`
      if (!used.has(stem.toLowerCase())) {
        used.add(stem.toLowerCase())
        return stem
      }
    }
  }
  const place = (name: string): string => {
    const sub = rng.pick(subfolders)
    return sub === "" ? `incoming/${name}` : `incoming/${sub}/${name}`
  }
  const files: Array<Incoming> = []
  for (let i = 0; i < size.files; i++) {
    // Every category gets at least one file, and at least two files go to "other".
    const category =
      i < categories.length ? categories[i] : rng.chance(0.8) ? rng.pick(categories) : undefined
    const forceOther = i === categories.length || i === categories.length + 1
    const chosen = forceOther ? undefined : category
    let ext: string = chosen === undefined ? rng.pick(otherExtensions) : rng.pick(chosen.extensions)
    if (hard && rng.chance(0.3)) ext = ext.toUpperCase()
    const name = `${uniqueStem()}.${ext}`
    const content = `${name}: the ${rng.pick(ADJECTIVES)} ${rng.pick(NOUNS)} ${rng.pick(VERBS)} ${rng.int(1, 999)}\n`
    files.push({ path: place(name), name, folder: chosen?.folder ?? "other", content })
  }
  const empties = Array.from({ length: size.empty }, () => {
    const name = `${uniqueStem()}.${rng.pick(categories).extensions[0]}`
    return { path: place(name), name }
  })
  const setupFiles: Array<FileSpec> = rng.shuffle([
    ...files.map((f) => ({ path: f.path, content: f.content })),
    ...empties.map((e) => ({ path: e.path, content: "" })),
  ])

  const rules = categories.map(
    (c) => `- \`sorted/${c.folder}/\` for ${c.extensions.map((e) => `.${e}`).join(", ")}`,
  )
  const manifest = size.empty > 0
  const instruction = [
    `The folder \`incoming/\` holds a batch of files that need sorting. Move every file into a folder under \`sorted/\` chosen by its extension:`,
    "",
    ...rules,
    "- `sorted/other/` for any other extension",
    "",
    "Keep each file's name exactly as it is.",
    ...(hard
      ? [
          "Some files sit in subfolders of `incoming/`; sort those too (the subfolders themselves do not matter). Extensions are matched case-insensitively, so `.JPG` counts as `.jpg`.",
        ]
      : []),
    ...(size.empty > 0
      ? ["Empty (zero-byte) files are junk: delete them instead of sorting them."]
      : []),
    "When you are done, no files may remain anywhere under `incoming/`.",
    ...(manifest
      ? [
          "",
          "Finally, write `sorted/manifest.txt` listing every sorted file as `<folder>/<file name>` (for example `other/notes.bin`), one per line, in byte order (the order `LC_ALL=C sort` gives). Do not list `manifest.txt` itself.",
        ]
      : []),
  ].join("\n")

  const cases = categories.map((c) => `    ${c.extensions.join("|")}) dest=${c.folder} ;;`)
  const solution = bashScript([
    `mkdir -p ${[...categories.map((c) => `sorted/${c.folder}`), "sorted/other"].join(" ")}`,
    ...(size.empty > 0 ? ["find incoming -type f -empty -delete"] : []),
    "find incoming -type f -print0 | while IFS= read -r -d '' f; do",
    `  name="\${f##*/}"`,
    `  ext="\${name##*.}"`,
    `  case "\${ext,,}" in`,
    ...cases,
    "    *) dest=other ;;",
    "  esac",
    '  mv -- "$f" "sorted/$dest/$name"',
    "done",
    ...(manifest
      ? [
          "(cd sorted && find . -mindepth 2 -type f | sed 's|^\\./||' | LC_ALL=C sort) > sorted/manifest.txt.tmp",
          "mv sorted/manifest.txt.tmp sorted/manifest.txt",
        ]
      : []),
  ])

  const byFolder = new Map<string, Record<string, string>>()
  for (const f of files) {
    const entry = byFolder.get(f.folder) ?? {}
    entry[f.name] = f.content
    byFolder.set(f.folder, entry)
  }
  const expected = Object.fromEntries([...byFolder.entries()].sort(([a], [b]) => (a < b ? -1 : 1)))
  const helpers = [
    `EXPECTED = ${py(expected)}`,
    `EMPTY = ${py(empties.map((e) => e.name))}`,
    "",
    "",
    "def names_in(folder):",
    '    d = APP / "sorted" / folder',
    "    return sorted(p.name for p in d.iterdir() if p.is_file()) if d.is_dir() else []",
  ]
  const folderTests: Array<TestCase> = [...byFolder.keys()].sort().map((folder) => ({
    name: `${folder}_folder_holds_its_files`,
    doc: `sorted/${folder}/ holds exactly the files that belong there`,
    body: [
      `got = [n for n in names_in(${py(folder)}) if n != "manifest.txt"]`,
      `assert got == sorted(EXPECTED[${py(folder)}])`,
    ],
  }))
  const tests: Array<TestCase> = [
    ...folderTests,
    {
      name: "incoming_is_empty",
      doc: "no regular file is left under incoming/",
      body: [
        'left = [str(p) for p in (APP / "incoming").rglob("*") if p.is_file()]',
        "assert left == []",
      ],
    },
    {
      name: "contents_are_preserved",
      doc: "every sorted file has its original content",
      body: [
        "for folder, files in EXPECTED.items():",
        "    for name, content in files.items():",
        '        assert (APP / "sorted" / folder / name).read_text() == content, name',
      ],
    },
    ...(size.empty > 0
      ? [
          {
            name: "empty_files_are_deleted",
            doc: "the zero-byte files are gone, neither left in incoming/ nor sorted",
            body: [
              'everywhere = [p.name for p in APP.rglob("*") if p.is_file()]',
              "for name in EMPTY:",
              "    assert name not in everywhere, name",
            ],
          },
        ]
      : []),
    ...(manifest
      ? [
          {
            name: "manifest_lists_sorted_files",
            doc: "sorted/manifest.txt lists every sorted file as folder/name in byte order",
            body: [
              'lines = (APP / "sorted" / "manifest.txt").read_text().splitlines()',
              'want = sorted(f"{folder}/{name}" for folder, files in EXPECTED.items() for name in files)',
              "assert [l for l in lines if l.strip()] == want",
            ],
          },
        ]
      : []),
  ]
  return {
    instruction,
    setup: bashScript(createFiles(setupFiles)),
    solution,
    ...pytestFile(tests, helpers),
  }
}

export const sortByType: TaskFamily = {
  name: "sort-by-type",
  summary: "move files from incoming/ into sorted/<category>/ by extension; drop empties; manifest",
  tags: ["file-ops", "mv", "find", "bash"],
  generate,
}
