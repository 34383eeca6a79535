import { createHash } from "node:crypto"
import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles, type FileSpec } from "../shell.ts"
import { NOUNS, VERBS } from "../vocabulary.ts"

const SIZES = {
  easy: { files: 6, corrupted: 1, missing: 1, untracked: 0 },
  medium: { files: 10, corrupted: 2, missing: 2, untracked: 2 },
  hard: { files: 14, corrupted: 3, missing: 2, untracked: 3 },
} as const

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const size = SIZES[difficulty]
  const medium = difficulty !== "easy"
  const hard = difficulty === "hard"
  const names = rng.shuffle(NOUNS)
  const subdirs = hard ? ["", "", "raw/", "raw/2024/", "docs/"] : [""]
  const body = () =>
    `${Array.from(
      { length: rng.int(1, 4) },
      () => `${rng.pick(NOUNS)} ${rng.pick(VERBS)} ${rng.int(0, 99999)}`,
    ).join("\n")}\n`
  const tracked = Array.from({ length: size.files }, (_, i) => ({
    path: `files/${rng.pick(subdirs)}${names[i]}.${rng.pick(["dat", "txt", "csv"])}`,
    content: body(),
  }))
  const untracked = Array.from({ length: size.untracked }, (_, i) => ({
    path: `files/${rng.pick(subdirs)}${names[size.files + i]}.${rng.pick(["dat", "txt"])}`,
    content: body(),
  }))
  const damaged = rng.sample(tracked, size.corrupted + size.missing)
  const corrupted = damaged.slice(0, size.corrupted)
  const missing = damaged.slice(size.corrupted)
  const manifest = rng
    .shuffle(tracked)
    .map((f) => `${sha256(f.content)}  ${f.path}`)
    .join("\n")

  const present: Array<FileSpec> = [
    ...tracked
      .filter((f) => !missing.includes(f))
      .map((f) =>
        corrupted.includes(f)
          ? { path: f.path, content: f.content.replace(/\d/, (d) => String((Number(d) + 1) % 10)) }
          : f,
      ),
    ...untracked,
  ]
  const backups: Array<FileSpec> = medium
    ? tracked.map((f) => ({ path: `backup/${f.path.slice("files/".length)}`, content: f.content }))
    : []
  const sorted = (paths: ReadonlyArray<string>) => [...paths].sort()
  const ok = size.files - size.corrupted - size.missing

  const instruction = [
    "`MANIFEST.sha256` lists SHA-256 checksums (in `sha256sum` format) for the files under `files/`. Some files no longer match, some are gone" +
      (medium ? ", and some files are not listed at all." : "."),
    "",
    "Audit them first, and write into a new folder `audit/`:",
    "",
    "1. `corrupted.txt`: the paths (as written in the manifest) of files that exist but whose checksum does not match, one per line, sorted.",
    "2. `missing.txt`: the paths listed in the manifest whose files do not exist, one per line, sorted.",
    ...(medium
      ? [
          "3. `untracked.txt`: the paths of regular files under files/ that the manifest does not list (written like `files/name.ext`), one per line, sorted.",
        ]
      : []),
    `${medium ? 4 : 3}. \`summary.txt\` with the three lines \`ok=<N>\`, \`corrupted=<N>\` and \`missing=<N>\` (ok counts the listed files that match).`,
    ...(medium
      ? [
          "",
          "Then repair: `backup/` holds good copies of every listed file, at the same path relative to `files/` (so `files/a/b.txt` is `backup/a/b.txt`). Restore the corrupted and missing files from it, so that `sha256sum -c MANIFEST.sha256` passes. Leave backup/ as it is.",
        ]
      : []),
    ...(hard
      ? [
          "Finally, move every untracked file into `quarantine/`, keeping its path relative to `files/` (so `files/a/x.dat` goes to `quarantine/a/x.dat`).",
        ]
      : []),
  ].join("\n")

  const solution = bashScript([
    "export LC_ALL=C",
    "mkdir -p audit",
    "{ sha256sum -c MANIFEST.sha256 2>/dev/null || true; } > /tmp/check.txt",
    "{ grep ': FAILED$' /tmp/check.txt || true; } | sed 's/: FAILED$//' | sort > audit/corrupted.txt",
    "{ grep ': FAILED open or read$' /tmp/check.txt || true; } | sed 's/: FAILED open or read$//' | sort > audit/missing.txt",
    ...(medium
      ? [
          "comm -13 <(awk '{print $2}' MANIFEST.sha256 | sort) <(find files -type f | sort) > audit/untracked.txt",
        ]
      : []),
    "{",
    "  echo \"ok=$(grep -c ': OK$' /tmp/check.txt || true)\"",
    '  echo "corrupted=$(wc -l < audit/corrupted.txt)"',
    '  echo "missing=$(wc -l < audit/missing.txt)"',
    "} > audit/summary.txt",
    ...(medium
      ? [
          "cat audit/corrupted.txt audit/missing.txt | while IFS= read -r p; do",
          '  mkdir -p "$(dirname "$p")"',
          `  cp "backup/\${p#files/}" "$p"`,
          "done",
        ]
      : []),
    ...(hard
      ? [
          "while IFS= read -r p; do",
          `  rel="\${p#files/}"`,
          '  mkdir -p "quarantine/$(dirname "$rel")"',
          '  mv "$p" "quarantine/$rel"',
          "done < audit/untracked.txt",
        ]
      : []),
  ])

  const helpers = [
    "import hashlib",
    "",
    `MANIFEST = ${py(Object.fromEntries(tracked.map((f) => [f.path, sha256(f.content)]).sort()))}`,
    "",
    "",
    "def listed(name):",
    '    return [l.strip() for l in (APP / "audit" / name).read_text().splitlines() if l.strip()]',
  ]
  const tests: Array<TestCase> = [
    {
      name: "corrupted_list",
      doc: "audit/corrupted.txt lists the files whose checksum does not match",
      body: [`assert listed("corrupted.txt") == ${py(sorted(corrupted.map((f) => f.path)))}`],
    },
    {
      name: "missing_list",
      doc: "audit/missing.txt lists the files that are gone",
      body: [`assert listed("missing.txt") == ${py(sorted(missing.map((f) => f.path)))}`],
    },
    {
      name: "summary_ok_count",
      doc: "audit/summary.txt counts the files that match",
      body: [
        'got = dict(l.replace(" ", "").split("=", 1) for l in listed("summary.txt"))',
        `assert got.get("ok") == ${py(String(ok))}`,
      ],
    },
    {
      name: "summary_problem_counts",
      doc: "audit/summary.txt counts the corrupted and missing files",
      body: [
        'got = dict(l.replace(" ", "").split("=", 1) for l in listed("summary.txt"))',
        `assert [got.get("corrupted"), got.get("missing")] == ${py([String(size.corrupted), String(size.missing)])}`,
      ],
    },
  ]
  if (medium)
    tests.push(
      {
        name: "untracked_list",
        doc: "audit/untracked.txt lists the files the manifest does not know",
        body: [`assert listed("untracked.txt") == ${py(sorted(untracked.map((f) => f.path)))}`],
      },
      {
        name: "manifest_verifies",
        doc: "every listed file exists with its listed checksum",
        body: [
          "for path, digest in MANIFEST.items():",
          "    assert hashlib.sha256((APP / path).read_bytes()).hexdigest() == digest, path",
        ],
      },
    )
  if (hard)
    tests.push({
      name: "untracked_quarantined",
      doc: "untracked files moved to quarantine/, keeping their relative paths",
      body: [
        `for path, content in ${py(Object.fromEntries(untracked.map((f) => [f.path, f.content])))}.items():`,
        '    rel = path.removeprefix("files/")',
        "    assert not (APP / path).exists(), path",
        '    assert (APP / "quarantine" / rel).read_text() == content, rel',
      ],
    })
  return {
    instruction,
    setup: bashScript(
      createFiles([
        ...rng.shuffle(present),
        ...backups,
        { path: "MANIFEST.sha256", content: `${manifest}\n` },
      ]),
    ),
    solution,
    ...pytestFile(tests, helpers),
  }
}

export const checksumAudit: TaskFamily = {
  name: "checksum-audit",
  summary:
    "verify a sha256sum manifest: corrupted, missing, untracked files; restore from backup; quarantine",
  tags: ["integrity", "sha256sum", "file-ops", "comm"],
  generate,
}
