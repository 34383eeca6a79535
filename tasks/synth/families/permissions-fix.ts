import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles, type FileSpec } from "../shell.ts"
import { NOUNS, VERBS } from "../vocabulary.ts"

type Group = "scripts" | "keys" | "public" | "readonly" | "other" | "private"
const MODES: Record<Group, string> = {
  scripts: "755",
  keys: "600",
  public: "644",
  readonly: "444",
  other: "644",
  private: "600",
}

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const medium = difficulty !== "easy"
  const hard = difficulty === "hard"
  const names = rng.shuffle(NOUNS)
  let n = 0
  const name = () => names[n++ % names.length] as string
  const text = () => `${rng.pick(NOUNS)} ${rng.pick(VERBS)} ${rng.pick(NOUNS)}\n`
  const files: Array<{ readonly path: string; readonly content: string; group: Group }> = []
  const add = (path: string, group: Group, content = text()) => files.push({ path, content, group })

  for (let i = 0; i < rng.int(2, 3); i++)
    add(`site/bin/${name()}.sh`, "scripts", `#!/bin/sh\necho ${name()}\n`)
  for (let i = 0; i < rng.int(2, 3); i++)
    add(`site/secrets/${name()}.key`, "keys", `key-${rng.int(100000, 999999)}\n`)
  for (let i = 0; i < rng.int(2, 4); i++)
    add(`site/public/${name()}.${rng.pick(["html", "css"])}`, "public")
  add("site/README.txt", "other")
  add(`site/data/${name()}.csv`, "other", `id,value\n1,${rng.int(1, 99)}\n`)
  if (medium)
    for (let i = 0; i < rng.int(2, 3); i++)
      add(`site/data/readonly/${name()}.csv`, "readonly", `id\n${rng.int(1, 99)}\n`)
  if (hard) {
    // One public and one other file become private; both groups keep at least one file.
    const marked = [
      rng.pick(files.filter((f) => f.group === "public")),
      rng.pick(files.filter((f) => f.group === "other")),
    ]
    for (const f of marked) {
      f.group = "private"
      ;(f as { content: string }).content = `${f.content}PRIVATE\n`
    }
    const trap = rng.pick(files.filter((f) => f.group === "public" || f.group === "other"))
    ;(trap as { content: string }).content = `${trap.content}# PRIVATE NOTES FOLLOW\n`
  }
  const dirs = [...new Set(files.map((f) => f.path.slice(0, f.path.lastIndexOf("/"))))]
  if (hard) dirs.push("site/tmp")
  dirs.sort()

  const setupFiles: Array<FileSpec> = files.map((f) => ({
    path: f.path,
    content: f.content,
    mode: rng.pick(["666", "777", "664"]),
  }))
  const setup = bashScript([
    ...createFiles(setupFiles),
    ...(hard ? ["mkdir -p site/tmp"] : []),
    "find site -type d -exec chmod 777 {} +",
  ])

  const instruction = [
    "The permissions under `site/` are a mess: everything is writable by everyone. Fix them:",
    "",
    "- every directory under `site/` (and `site/` itself): `755`, except the ones below;",
    "- `site/secrets/`: `700`, and the `.key` files in it: `600`;",
    "- the shell scripts in `site/bin/`: `755`;",
    ...(medium ? ["- the files in `site/data/readonly/`: `444` (read-only for everybody);"] : []),
    ...(hard ? ["- `site/tmp/`: `1777` (world-writable with the sticky bit, like /tmp);"] : []),
    "- every other file: `644`.",
    ...(hard
      ? [
          "",
          "One more rule wins over all of the above: a file that contains a line consisting of exactly `PRIVATE` must be `600`.",
          "",
          "Finally write `perm-report.txt` listing every regular file under site/ as `<mode> <path>`, where mode is the octal mode as `stat -c %a` prints it and path is relative to /app (e.g. `644 site/README.txt`), sorted by path.",
        ]
      : []),
  ].join("\n")

  const solution = bashScript([
    "find site -type d -exec chmod 755 {} +",
    "find site -type f -exec chmod 644 {} +",
    "chmod 755 site/bin/*.sh",
    "chmod 700 site/secrets",
    "chmod 600 site/secrets/*.key",
    ...(medium ? ["chmod 444 site/data/readonly/*"] : []),
    ...(hard
      ? [
          "chmod 1777 site/tmp",
          "grep -rlx --null PRIVATE site | xargs -0 -r chmod 600",
          "find site -type f -printf '%m %p\\n' | LC_ALL=C sort -k2 > perm-report.txt",
        ]
      : []),
  ])

  const byGroup = (g: Group) =>
    files
      .filter((f) => f.group === g)
      .map((f) => f.path)
      .sort()
  const dirModes = Object.fromEntries(
    dirs.map((d) => [d, d === "site/secrets" ? 0o700 : d === "site/tmp" ? 0o1777 : 0o755]),
  )
  dirModes.site = 0o755
  const helpers = [
    `DIRS = ${py(Object.fromEntries(Object.entries(dirModes).sort()))}`,
    "",
    "",
    "def mode(path):",
    "    return stat.S_IMODE(os.stat(APP / path).st_mode)",
    "",
    "",
    "def assert_modes(paths, want):",
    "    assert len(paths) > 0",
    "    for p in paths:",
    '        assert mode(p) == want, f"{p}: {oct(mode(p))}"',
  ]
  const groupTest = (g: Group, testName: string, doc: string): TestCase => ({
    name: testName,
    doc,
    body: [`assert_modes(${py(byGroup(g))}, 0o${MODES[g]})`],
  })
  const tests: Array<TestCase> = [
    groupTest("scripts", "scripts_are_executable", "the scripts in site/bin are 755"),
    groupTest("keys", "keys_are_private", "the .key files are 600"),
    {
      name: "secrets_dir_is_private",
      doc: "site/secrets is 700",
      body: ['assert mode("site/secrets") == 0o700'],
    },
    groupTest("public", "public_files_are_readable", "public files are 644"),
    groupTest("other", "other_files_are_644", "the remaining files are 644"),
    {
      name: "directories",
      doc: "directories have their required modes",
      body: ["for d, want in DIRS.items():", '    assert mode(d) == want, f"{d}: {oct(mode(d))}"'],
    },
    {
      name: "nothing_world_writable",
      doc: "no file or directory is world-writable (the sticky tmp excepted)",
      body: [
        'paths = [APP / "site", *(APP / "site").rglob("*")]',
        "bad = [str(p) for p in paths if os.stat(p).st_mode & stat.S_IWOTH and not os.stat(p).st_mode & stat.S_ISVTX]",
        "assert bad == []",
      ],
    },
  ]
  if (medium)
    tests.push(groupTest("readonly", "readonly_data", "files in site/data/readonly are 444"))
  if (hard) {
    const report = files
      .map((f) => `${MODES[f.group]} ${f.path}`)
      .sort((a, b) => {
        const pa = a.slice(a.indexOf(" ") + 1)
        const pb = b.slice(b.indexOf(" ") + 1)
        return pa < pb ? -1 : 1
      })
    tests.push(
      {
        name: "tmp_is_sticky",
        doc: "site/tmp is 1777",
        body: ['assert mode("site/tmp") == 0o1777'],
      },
      groupTest("private", "private_files_are_600", "files with a PRIVATE line are 600"),
      {
        name: "permission_report",
        doc: "perm-report.txt lists every file's mode and path, sorted by path",
        body: [
          'lines = [" ".join(l.split()) for l in (APP / "perm-report.txt").read_text().splitlines() if l.strip()]',
          `assert lines == ${py(report)}`,
        ],
      },
    )
  }
  return { instruction, setup, solution, ...pytestFile(tests, helpers) }
}

export const permissionsFix: TaskFamily = {
  name: "permissions-fix",
  summary:
    "repair file and directory modes by role (chmod, find); sticky bit; content rule; mode report",
  tags: ["permissions", "chmod", "find", "stat"],
  generate,
}
