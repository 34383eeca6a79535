import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles, shellQuote } from "../shell.ts"
import { NOUNS } from "../vocabulary.ts"

type Setting = { readonly key: string; readonly value: string; readonly usesDomain: boolean }

const SECTIONS: Record<string, (rng: Rng, domain: string) => ReadonlyArray<Setting>> = {
  server: (rng, d) => [
    { key: "port", value: String(rng.int(8000, 8999)), usesDomain: false },
    { key: "workers", value: String(rng.int(2, 16)), usesDomain: false },
    { key: "log_level", value: rng.pick(["info", "warn", "debug"]), usesDomain: false },
    { key: "public_url", value: `https://www.${d}`, usesDomain: true },
    { key: "debug_toolbar", value: rng.pick(["true", "false"]), usesDomain: false },
  ],
  database: (rng, d) => [
    { key: "db_host", value: `db.${d}`, usesDomain: true },
    { key: "db_port", value: String(rng.pick([5432, 3306, 26257])), usesDomain: false },
    { key: "db_name", value: rng.pick(NOUNS), usesDomain: false },
    { key: "pool_size", value: String(rng.int(4, 64)), usesDomain: false },
  ],
  cache: (rng, d) => [
    { key: "cache_url", value: `redis://cache.${d}:6379`, usesDomain: true },
    { key: "ttl_seconds", value: String(rng.int(30, 3600)), usesDomain: false },
    { key: "max_entries", value: String(rng.int(100, 100000)), usesDomain: false },
  ],
  auth: (rng, d) => [
    { key: "issuer", value: `https://auth.${d}`, usesDomain: true },
    { key: "token_ttl", value: String(rng.int(60, 86400)), usesDomain: false },
    { key: "allow_signup", value: rng.pick(["true", "false"]), usesDomain: false },
    { key: "legacy_mode", value: rng.pick(["on", "off"]), usesDomain: false },
  ],
  mail: (rng, d) => [
    { key: "smtp_host", value: `smtp.${d}`, usesDomain: true },
    { key: "mail_from", value: `noreply@${d}`, usesDomain: true },
    { key: "retries", value: String(rng.int(1, 9)), usesDomain: false },
  ],
}

const EDIT_KINDS = ["set", "comment", "uncomment", "delete", "domain", "insert", "append"] as const
type EditKind = (typeof EDIT_KINDS)[number]
const EDIT_COUNT = { easy: 2, medium: 4, hard: 6 } as const

const TOGGLES: Record<string, string> = { true: "false", false: "true", on: "off", off: "on" }
const LEVELS = ["info", "warn", "debug", "error"]

/** A different value of the same kind. */
const changedValue = (rng: Rng, value: string): string => {
  if (/^\d+$/.test(value)) return String(Number(value) + rng.int(1, 50))
  const toggled = TOGGLES[value]
  if (toggled !== undefined) return toggled
  if (LEVELS.includes(value)) return rng.pick(LEVELS.filter((l) => l !== value))
  return rng.pick(NOUNS.filter((n) => n !== value))
}

const escapeRegex = (s: string) => s.replace(/[.[\]*^$\\/]/g, "\\$&")

interface Edit {
  readonly kind: EditKind
  readonly instruction: string
  readonly sed: string
  readonly apply: (lines: Array<string>) => Array<string>
  readonly test: TestCase
}

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const domain = `${rng.pick(NOUNS)}-old.internal`
  const newDomain = `${rng.pick(NOUNS)}.example.net`
  const sectionNames = [
    "server",
    ...rng.sample(
      Object.keys(SECTIONS).filter((s) => s !== "server"),
      difficulty === "easy" ? 2 : 3,
    ),
  ]
  const sections = sectionNames.map((name) => ({
    name,
    settings: (SECTIONS[name] as (rng: Rng, domain: string) => ReadonlyArray<Setting>)(rng, domain),
  }))
  const plain = rng.shuffle(sections.flatMap((s) => s.settings.filter((x) => !x.usesDomain)))
  const kinds = rng
    .sample(EDIT_KINDS, EDIT_COUNT[difficulty])
    .sort((a, b) => EDIT_KINDS.indexOf(a) - EDIT_KINDS.indexOf(b))
  const commentedKey = kinds.includes("uncomment") ? plain.pop() : undefined

  const lines: Array<string> = [`# configuration for ${rng.pick(NOUNS)} service`, ""]
  for (const section of sections) {
    lines.push(`[${section.name}]`)
    for (const s of section.settings)
      lines.push(s === commentedKey ? `# ${s.key} = ${s.value}` : `${s.key} = ${s.value}`)
    lines.push("")
  }
  const original = `${lines.join("\n")}\n`

  const norm = 'def norm(line):\n    return " ".join(line.replace("=", " = ").split())'
  const editFor = (kind: EditKind): Edit => {
    switch (kind) {
      case "set": {
        const s = plain.pop() as Setting
        const value = changedValue(rng, s.value)
        return {
          kind,
          instruction: `Change the value of \`${s.key}\` to \`${value}\`, so that the line reads \`${s.key} = ${value}\`.`,
          sed: `sed -i ${shellQuote(`s/^${s.key} = .*/${s.key} = ${value}/`)} app.conf`,
          apply: (ls) => ls.map((l) => (l === `${s.key} = ${s.value}` ? `${s.key} = ${value}` : l)),
          test: {
            name: `${s.key}_is_changed`,
            doc: `${s.key} now has the value ${value}`,
            body: [
              `assert ${py(`${s.key} = ${value}`)} in [norm(l) for l in conf_lines()]`,
              `assert ${py(`${s.key} = ${s.value}`)} not in [norm(l) for l in conf_lines()]`,
            ],
          },
        }
      }
      case "comment": {
        const s = plain.pop() as Setting
        const line = `${s.key} = ${s.value}`
        return {
          kind,
          instruction: `Disable \`${s.key}\` by commenting its line out: put \`# \` in front of it (the rest of the line stays as it is).`,
          sed: `sed -i ${shellQuote(`s/^${s.key} = /# &/`)} app.conf`,
          apply: (ls) => ls.map((l) => (l === line ? `# ${line}` : l)),
          test: {
            name: `${s.key}_is_commented_out`,
            doc: `the ${s.key} line is commented out, not deleted`,
            body: [
              "got = [norm(l) for l in conf_lines()]",
              `assert ${py(`# ${line}`)} in got`,
              `assert ${py(line)} not in got`,
            ],
          },
        }
      }
      case "uncomment": {
        const s = commentedKey as Setting
        const line = `${s.key} = ${s.value}`
        return {
          kind,
          instruction: `Enable \`${s.key}\`: its line is commented out; remove the leading \`# \` so it reads \`${line}\`.`,
          sed: `sed -i ${shellQuote(`s/^# \\(${s.key} = \\)/\\1/`)} app.conf`,
          apply: (ls) => ls.map((l) => (l === `# ${line}` ? line : l)),
          test: {
            name: `${s.key}_is_enabled`,
            doc: `the ${s.key} line is no longer commented out`,
            body: [
              "got = [norm(l) for l in conf_lines()]",
              `assert ${py(line)} in got`,
              `assert ${py(`# ${line}`)} not in got`,
            ],
          },
        }
      }
      case "delete": {
        const s = plain.pop() as Setting
        return {
          kind,
          instruction: `Remove the \`${s.key}\` line completely (do not leave a blank line in its place).`,
          sed: `sed -i ${shellQuote(`/^${s.key} = /d`)} app.conf`,
          apply: (ls) => ls.filter((l) => l !== `${s.key} = ${s.value}`),
          test: {
            name: `${s.key}_is_removed`,
            doc: `no line mentions ${s.key} any more`,
            body: [
              'keys = [l.lstrip("# ").split("=")[0].strip() for l in conf_lines()]',
              "assert len(keys) > 0",
              `assert ${py(s.key)} not in keys`,
            ],
          },
        }
      }
      case "domain":
        return {
          kind,
          instruction: `The domain \`${domain}\` has moved to \`${newDomain}\`: replace every occurrence of the old domain with the new one.`,
          sed: `sed -i ${shellQuote(`s/${escapeRegex(domain)}/${newDomain}/g`)} app.conf`,
          apply: (ls) => ls.map((l) => l.replaceAll(domain, newDomain)),
          test: {
            name: "domain_is_replaced",
            doc: "the old domain is gone and every line that used it now uses the new one",
            body: [
              'text = (APP / "app.conf").read_text()',
              `assert ${py(domain)} not in text`,
              `assert text.count(${py(newDomain)}) == ${original.split(domain).length - 1}`,
            ],
          },
        }
      case "insert": {
        const section = rng.pick(sections).name
        const line = `${rng.pick(["connect_timeout", "max_body_kb", "idle_seconds"])} = ${rng.int(5, 120)}`
        return {
          kind,
          instruction: `Add the line \`${line}\` directly below the \`[${section}]\` header (as the section's first line).`,
          sed: `sed -i ${shellQuote(`/^\\[${section}\\]$/a ${line}`)} app.conf`,
          apply: (ls) => ls.flatMap((l) => (l === `[${section}]` ? [l, line] : [l])),
          test: {
            name: `line_added_to_${section}`,
            doc: `${line} is the first line of [${section}]`,
            body: [
              "got = conf_lines()",
              `at = got.index(${py(`[${section}]`)})`,
              `assert norm(got[at + 1]) == ${py(line)}`,
            ],
          },
        }
      }
      case "append": {
        const line = `[features]`
        return {
          kind,
          instruction:
            "Append a new section at the very end of the file: a line `[features]` followed by a line `beta = true`.",
          sed: "printf '%s\\n' '[features]' 'beta = true' >> app.conf",
          apply: (ls) => [...ls, line, "beta = true"],
          test: {
            name: "features_section_appended",
            doc: "the file ends with the [features] section",
            body: [
              "got = [l for l in conf_lines() if l.strip()]",
              'assert [norm(l) for l in got[-2:]] == ["[features]", "beta = true"]',
            ],
          },
        }
      }
    }
  }
  const edits = kinds.map(editFor)

  let expectedLines = lines
  for (const e of edits) expectedLines = e.apply(expectedLines)
  const expected = `${expectedLines.join("\n")}\n`

  const instruction = [
    "`app.conf` is the configuration file of a service. First save an untouched copy of it as `app.conf.bak`. Then edit `app.conf` in place:",
    "",
    ...edits.map((e, i) => `${i + 1}. ${e.instruction}`),
    "",
    "Every other line, comments and blank lines included, must stay exactly as it is and where it is.",
  ].join("\n")
  const solution = bashScript(["cp app.conf app.conf.bak", ...edits.map((e) => e.sed)])
  const helpers = [
    `ORIGINAL = ${py(original)}`,
    `EXPECTED = ${py(expected)}`,
    "",
    "",
    norm,
    "",
    "",
    "def conf_lines():",
    '    return (APP / "app.conf").read_text().splitlines()',
  ]
  const tests: Array<TestCase> = [
    {
      name: "backup_is_the_original",
      doc: "app.conf.bak is an untouched copy of the original file",
      body: ['assert (APP / "app.conf.bak").read_text() == ORIGINAL'],
    },
    ...edits.map((e) => e.test),
    {
      name: "whole_file_is_as_expected",
      doc: "apart from the requested edits, app.conf is unchanged",
      body: [
        "got = [l.rstrip() for l in conf_lines()]",
        "want = EXPECTED.splitlines()",
        "while got and not got[-1]:",
        "    got.pop()",
        "while want and not want[-1]:",
        "    want.pop()",
        "assert got == want",
      ],
    },
  ]
  return {
    instruction,
    setup: bashScript(createFiles([{ path: "app.conf", content: original }])),
    solution,
    ...pytestFile(tests, helpers),
  }
}

export const configEdit: TaskFamily = {
  name: "config-edit",
  summary:
    "in-place edits of an INI-style config with sed: set, comment, uncomment, delete, rename domain, insert",
  tags: ["text", "sed", "config"],
  generate,
}
