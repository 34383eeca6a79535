import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles, type FileSpec } from "../shell.ts"
import { NOUNS, VERBS } from "../vocabulary.ts"

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const medium = difficulty !== "easy"
  const hard = difficulty === "hard"
  const names = rng.shuffle(NOUNS)
  let n = 0
  const name = () => names[n++ % names.length] as string
  const line = () => `${rng.pick(NOUNS)} ${rng.pick(VERBS)} ${rng.pick(NOUNS)} ${rng.int(1, 999)}\n`

  const kept: Array<FileSpec> = [{ path: "project/README.md", content: `# ${name()}\n${line()}` }]
  for (let i = 0; i < rng.int(3, 5); i++)
    kept.push({
      path: `project/src/${name()}.${rng.pick(["py", "sh", "txt"])}`,
      content: line() + line(),
    })
  for (let i = 0; i < rng.int(1, 2); i++)
    kept.push({ path: `project/docs/${name()}.md`, content: line() })
  const logs: Array<FileSpec> = Array.from({ length: rng.int(2, 3) }, () => ({
    path: `project/logs/${name()}.log`,
    content: line() + line() + line(),
  }))
  if (medium) logs.push({ path: `project/src/${name()}.log`, content: line() })
  const cache: Array<FileSpec> = Array.from({ length: 2 }, () => ({
    path: `project/cache/${name()}.bin`,
    content: line(),
  }))
  const temps: Array<FileSpec> = hard
    ? [
        { path: `project/src/${name()}.tmp`, content: line() },
        { path: `project/docs/${name()}.tmp`, content: line() },
      ]
    : []
  const bundle: Array<FileSpec> = medium
    ? Array.from({ length: rng.int(2, 4) }, (_, i) => ({
        path: `${i === 0 ? "data" : rng.pick(["data", "data/extra", "notes"])}/${name()}.txt`,
        content: line(),
      }))
    : []

  const setup = bashScript([
    ...createFiles(
      [...kept, ...logs, ...cache, ...temps].sort((a, b) => (a.path < b.path ? -1 : 1)),
    ),
    ...(medium
      ? [
          "staging=$(mktemp -d)",
          "(",
          '  cd "$staging"',
          ...createFiles(bundle),
          ")",
          "mkdir -p incoming",
          `tar -czf incoming/bundle.tar.gz -C "$staging" ${[...new Set(bundle.map((b) => b.path.split("/")[0] as string))].sort().join(" ")}`,
          'rm -rf "$staging"',
        ]
      : []),
  ])

  const excluded = hard
    ? "every log file (`*.log`, and `*.log.gz` if you compress them first), every `*.tmp` file, and the whole `project/cache/` directory"
    : "every `*.log` file and the whole `project/cache/` directory"
  const instruction = [
    `The folder \`project/\` needs backing up${medium ? ", and a bundle of files has arrived in `incoming/`" : ""}. Do the following:`,
    "",
    `1. Create \`backup/project.tar.gz\`, a gzip-compressed tar archive of the \`project/\` folder. Member paths must start with \`project/\` (e.g. \`project/README.md\`). Leave out ${excluded}.`,
    ...(medium
      ? [
          "2. Extract the archive `incoming/bundle.tar.gz` into a new folder `restored/`, so that its members end up directly under `restored/` with their paths kept.",
        ]
      : []),
    ...(hard
      ? [
          "3. Compress each log file in `project/logs/` on its own with gzip, so that `x.log` becomes `x.log.gz` and the uncompressed file is gone.",
          "4. Write `backup/contents.txt`: the paths of the regular files inside backup/project.tar.gz (no directories), one per line, sorted.",
        ]
      : []),
  ].join("\n")

  const solution = bashScript([
    "mkdir -p backup",
    `tar -czf backup/project.tar.gz --exclude='*.log' --exclude='*.log.gz'${hard ? " --exclude='*.tmp'" : ""} --exclude=project/cache project`,
    ...(medium ? ["mkdir -p restored", "tar -xzf incoming/bundle.tar.gz -C restored"] : []),
    ...(hard
      ? [
          "gzip project/logs/*.log",
          "tar -tzf backup/project.tar.gz | grep -v '/$' | LC_ALL=C sort > backup/contents.txt",
        ]
      : []),
  ])

  const members = Object.fromEntries(kept.map((f) => [f.path, f.content]).sort())
  const helpers = [
    "import gzip",
    "import tarfile",
    "",
    `KEPT = ${py(members)}`,
    "",
    "",
    "def archive_files():",
    '    with tarfile.open(APP / "backup" / "project.tar.gz", "r:gz") as tar:',
    '        return {m.name.removeprefix("./"): tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}',
  ]
  const tests: Array<TestCase> = [
    {
      name: "backup_is_a_gzipped_tar",
      doc: "backup/project.tar.gz is a gzip-compressed tar archive",
      body: [
        'path = APP / "backup" / "project.tar.gz"',
        'assert path.read_bytes()[:2] == b"\\x1f\\x8b"',
        "assert tarfile.is_tarfile(path)",
      ],
    },
    {
      name: "backup_has_the_project_files",
      doc: "every file that should be kept is in the archive under project/",
      body: ["got = archive_files()", "assert all(p in got for p in KEPT), sorted(got)"],
    },
    {
      name: "backup_excludes_logs",
      doc: "no log file is in the archive",
      body: [
        "got = archive_files()",
        "assert len(got) > 0",
        'assert not [p for p in got if p.endswith(".log") or p.endswith(".log.gz")]',
      ],
    },
    {
      name: "backup_excludes_cache",
      doc: "project/cache is not in the archive",
      body: [
        "got = archive_files()",
        "assert len(got) > 0",
        'assert not [p for p in got if p.startswith("project/cache")]',
      ],
    },
    {
      name: "backup_contents_match",
      doc: "the archived files have the original contents and nothing else is archived",
      body: ["assert archive_files() == KEPT"],
    },
  ]
  if (medium)
    tests.push({
      name: "bundle_is_extracted",
      doc: "incoming/bundle.tar.gz is extracted under restored/",
      body: [
        `want = ${py(Object.fromEntries(bundle.map((b) => [b.path, b.content])))}`,
        "for path, content in want.items():",
        '    assert (APP / "restored" / path).read_text() == content, path',
      ],
    })
  if (hard)
    tests.push(
      {
        name: "tmp_files_excluded",
        doc: "no .tmp file is in the archive",
        body: [
          "got = archive_files()",
          "assert len(got) > 0",
          'assert not [p for p in got if p.endswith(".tmp")]',
        ],
      },
      {
        name: "logs_are_gzipped",
        doc: "each log in project/logs was replaced by its .gz",
        body: [
          `want = ${py(Object.fromEntries(logs.filter((l) => l.path.startsWith("project/logs/")).map((l) => [l.path, l.content])))}`,
          "for path, content in want.items():",
          "    assert not (APP / path).exists(), path",
          '    assert gzip.decompress((APP / (path + ".gz")).read_bytes()).decode() == content, path',
        ],
      },
      {
        name: "contents_listing",
        doc: "backup/contents.txt lists the archived files, sorted",
        body: [
          'lines = [l.strip().removeprefix("./") for l in (APP / "backup" / "contents.txt").read_text().splitlines() if l.strip()]',
          "assert lines == sorted(KEPT)",
        ],
      },
    )
  return { instruction, setup, solution, ...pytestFile(tests, helpers) }
}

export const archiveBackup: TaskFamily = {
  name: "archive-backup",
  summary: "tar/gzip a project with exclusions, extract a bundle, gzip logs in place, list members",
  tags: ["archives", "tar", "gzip"],
  generate,
}
