import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles, type FileSpec, shellQuote } from "../shell.ts"
import { ADJECTIVES, NOUNS } from "../vocabulary.ts"

const LARGE_BYTES = 10240

interface Photo {
  readonly path: string
  readonly final: string
  readonly content: string | undefined
  readonly size: number
}

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const medium = difficulty !== "easy"
  const hard = difficulty === "hard"
  const dirs = [
    "photos",
    `photos/${rng.int(2019, 2024)}`,
    `photos/${rng.pick(NOUNS)}`,
    `photos/${rng.pick(NOUNS)}/${rng.pick(ADJECTIVES)}`,
  ]
  const rename = (name: string) => {
    let out = name.replace(/\.jpeg$/i, ".jpg")
    if (medium) out = out.replaceAll(" ", "_")
    if (hard) out = out.toLowerCase()
    return out
  }
  const used = new Set<string>()
  const photos: Array<Photo> = []
  const count = { easy: 8, medium: 12, hard: 16 }[difficulty]
  while (photos.length < count) {
    const dir = rng.pick(dirs)
    const stemWords = [rng.pick(ADJECTIVES), rng.pick(NOUNS), String(rng.int(1, 99))]
    const sep = medium && rng.chance(0.4) ? " " : "_"
    let stem = stemWords.join(sep)
    if (hard && rng.chance(0.4)) stem = stem.toUpperCase()
    else if (rng.chance(0.3)) stem = `IMG${sep}${rng.int(1000, 9999)}`
    const ext =
      photos.length < 3
        ? rng.pick(["jpeg", "JPEG"])
        : rng.pick(["jpeg", "JPEG", "jpg", "png", "gif"])
    const name = `${stem}.${ext}`
    const final = `${dir}/${rename(name)}`
    if (used.has(final.toLowerCase()) || used.has(`${dir}/${name}`.toLowerCase())) continue
    used.add(final.toLowerCase())
    used.add(`${dir}/${name}`.toLowerCase())
    const large = hard && photos.length % 4 === 1
    const size = large ? rng.int(15000, 60000) : 0
    photos.push({
      path: `${dir}/${name}`,
      final,
      content: large ? undefined : `${name} ${rng.pick(NOUNS)} ${rng.int(1, 9999)}\n`,
      size: large ? size : 0,
    })
  }
  const tmpOld = Array.from(
    { length: rng.int(2, 3) },
    (_, i) => `${rng.pick(dirs)}/cache-old-${i}-${rng.pick(NOUNS)}.tmp`,
  )
  const tmpNew = Array.from(
    { length: rng.int(1, 2) },
    (_, i) => `${rng.pick(dirs)}/cache-new-${i}-${rng.pick(NOUNS)}.tmp`,
  )

  const files: Array<FileSpec> = [
    ...photos
      .filter((p) => p.content !== undefined)
      .map((p) => ({ path: p.path, content: p.content as string })),
    ...tmpOld.map((path) => ({
      path,
      content: "stale\n",
      mtime: `20${rng.int(18, 21)}-0${rng.int(1, 9)}-1${rng.int(0, 9)} 12:00:00`,
    })),
    ...tmpNew.map((path) => ({ path, content: "fresh\n" })),
  ]
  const setup = bashScript([
    ...createFiles(rng.shuffle(files)),
    ...photos
      .filter((p) => p.content === undefined)
      .map((p) => `head -c ${p.size} /dev/zero | tr '\\0' 'x' > ${shellQuote(p.path)}`),
  ])

  const steps = [
    "Rename every `.jpeg` file (any case: `.jpeg`, `.JPEG`, …) to the same name with the extension `.jpg`.",
    ...(medium ? ["Replace every space in file names with an underscore (`_`)."] : []),
    ...(hard
      ? ["Make every file name entirely lower case (directory names are already lower case)."]
      : []),
    "Delete the `.tmp` files that were last modified more than 30 days ago; keep the newer ones.",
    ...(hard
      ? [
          `After the renames, write \`large_files.txt\` listing the files under photos/ larger than ${LARGE_BYTES} bytes, one path per line relative to /app (e.g. \`photos/x/y.jpg\`), in byte order.`,
        ]
      : []),
  ]
  const instruction = [
    "The folder `photos/` and its subfolders need cleaning up. Apply these rules to every file in the whole tree:",
    "",
    ...steps.map((s, i) => `${i + 1}. ${s}`),
    "",
    "Files stay in the folder they are in, and their contents must not change.",
  ].join("\n")

  const solution = bashScript([
    "find photos -type f -name '*.tmp' -mtime +30 -delete",
    `find photos -type f -iname '*.jpeg' -print0 | while IFS= read -r -d '' f; do mv -- "$f" "\${f%.*}.jpg"; done`,
    ...(medium
      ? [
          "find photos -type f -name '* *' -print0 | while IFS= read -r -d '' f; do",
          `  b="\${f##*/}"`,
          `  mv -- "$f" "\${f%/*}/\${b// /_}"`,
          "done",
        ]
      : []),
    ...(hard
      ? [
          "find photos -type f -print0 | while IFS= read -r -d '' f; do",
          `  b="\${f##*/}"`,
          `  l="\${b,,}"`,
          `  [ "$b" = "$l" ] || mv -- "$f" "\${f%/*}/$l"`,
          "done",
          `find photos -type f -size +${LARGE_BYTES / 1024}k | LC_ALL=C sort > large_files.txt`,
        ]
      : []),
  ])

  const finals = Object.fromEntries(photos.map((p) => [p.final, p.content ?? p.size]).sort())
  const helpers = [
    `FINAL = ${py(finals)}`,
    `OLD_TMP = ${py(tmpOld)}`,
    `NEW_TMP = ${py(tmpNew)}`,
    "",
    "",
    "def all_files():",
    '    return [str(p.relative_to(APP)) for p in (APP / "photos").rglob("*") if p.is_file()]',
  ]
  const tests: Array<TestCase> = [
    {
      name: "no_jpeg_left",
      doc: "no file name ends in .jpeg in any case",
      body: [
        "files = all_files()",
        "assert len(files) > 0",
        'assert [f for f in files if f.lower().endswith(".jpeg")] == []',
      ],
    },
    {
      name: "photos_at_their_new_names",
      doc: "every photo is at its expected final path with its content intact",
      body: [
        "for path, want in FINAL.items():",
        "    p = APP / path",
        "    if isinstance(want, int):",
        "        assert p.stat().st_size == want, path",
        "    else:",
        "        assert p.read_text() == want, path",
      ],
    },
    {
      name: "nothing_else_in_the_tree",
      doc: "the tree holds exactly the renamed photos and the recent .tmp files",
      body: ["assert sorted(all_files()) == sorted(list(FINAL) + NEW_TMP)"],
    },
    {
      name: "old_tmp_files_deleted",
      doc: "the .tmp files older than 30 days are gone, the recent ones kept",
      body: [
        "for path in OLD_TMP:",
        "    assert not (APP / path).exists(), path",
        "for path in NEW_TMP:",
        "    assert (APP / path).exists(), path",
      ],
    },
  ]
  if (medium)
    tests.push({
      name: "no_spaces_in_names",
      doc: "no file name contains a space",
      body: [
        "files = all_files()",
        "assert len(files) > 0",
        'assert [f for f in files if " " in f] == []',
        "assert all((APP / p).exists() for p in FINAL)",
      ],
    })
  if (hard)
    tests.push(
      {
        name: "names_are_lower_case",
        doc: "every file name is lower case",
        body: [
          "files = all_files()",
          "assert [f for f in files if f != f.lower()] == []",
          "assert all((APP / p).exists() for p in FINAL)",
        ],
      },
      {
        name: "large_files_listed",
        doc: `large_files.txt lists the files over ${LARGE_BYTES} bytes`,
        body: [
          'lines = [l.strip().removeprefix("./") for l in (APP / "large_files.txt").read_text().splitlines() if l.strip()]',
          `assert lines == ${py(
            photos
              .filter((p) => p.size > LARGE_BYTES)
              .map((p) => p.final)
              .sort(),
          )}`,
        ],
      },
    )
  return { instruction, setup, solution, ...pytestFile(tests, helpers) }
}

export const findRename: TaskFamily = {
  name: "find-rename",
  summary:
    "batch renames across a tree (extensions, spaces, case), age-based deletion, size listing with find",
  tags: ["find", "file-ops", "rename", "bash"],
  generate,
}
