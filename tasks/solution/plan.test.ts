import { execFileSync, spawnSync } from "node:child_process"
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MAX_SOLUTION_STEPS, planSolution, SOLUTION_FILE, solutionCommands } from "./plan.ts"

let root = ""
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "t1-solution-"))
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C.UTF-8", HOME: tmpdir() }

const tarred = (file: string, flag: string) =>
  execFileSync("tar", [flag, file], { encoding: "utf8" })

/**
 * Every file under `dir` with its content, sorted; a tar archive by its member list and its
 * members' contents (its bytes hold the members' mtimes, which differ whenever the two runs
 * straddle a second).
 */
const tree = (dir: string): Array<string> => {
  const out: Array<string> = []
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name)
      if (statSync(p).isDirectory()) {
        out.push(`${relative(dir, p)}/`)
        walk(p)
      } else if (name.endsWith(".tar"))
        out.push(`${relative(dir, p)}: ${tarred(p, "-tf")}${tarred(p, "-xOf")}`)
      else out.push(`${relative(dir, p)}: ${readFileSync(p, "utf8")}`)
    }
  }
  walk(dir)
  return out
}

const squote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`

let runs = 0
/** What `bash solve.sh` does, and what the agent's persistent shell does running `commands`. */
const compare = (script: string, commands: ReadonlyArray<string>) => {
  const id = `${runs++}`
  const a = join(root, id, "script")
  const b = join(root, id, "steps")
  mkdirSync(a, { recursive: true })
  mkdirSync(b, { recursive: true })
  const scriptFile = join(root, id, "solve.sh")
  writeFileSync(scriptFile, script)
  const driver = join(root, id, "driver.sh")
  writeFileSync(driver, commands.map((c) => `eval -- ${squote(c)} </dev/null\n`).join(""))
  const run = (cwd: string, file: string) =>
    spawnSync("bash", ["--noprofile", "--norc", file], { cwd, env, encoding: "utf8", input: "" })
  const expected = run(a, scriptFile)
  const actual = run(b, driver)
  expect(actual.stdout).toBe(expected.stdout)
  expect(tree(b)).toEqual(tree(a))
  return expected.stdout
}

/**
 * Each command is complete on its own: bash accepts it as a function body (one bash process checks
 * them all without running them).
 */
const checkSyntax = (commands: ReadonlyArray<string>) => {
  const check = commands
    .map((c, k) => `eval ${squote(`__t1_check() {\n${c}\n}`)} 2>/dev/null || echo "bad ${k}"\n`)
    .join("")
  const r = spawnSync("bash", ["--noprofile", "--norc"], { input: check, encoding: "utf8" })
  const bad = r.stdout.split("\n").filter((l) => l.startsWith("bad "))
  expect(bad.map((l) => commands[Number(l.slice(4))])).toEqual([])
}

const steps = (script: string): ReadonlyArray<string> => {
  const plan = planSolution(script)
  if (plan.kind !== "steps") throw new Error(`expected steps, got whole: ${plan.reason}`)
  return plan.steps
}

const SPLIT: Record<string, string> = {
  synthetic: `#!/usr/bin/env bash
set -euo pipefail
mkdir -p backup project/logs
printf 'a\\nb\\n' > project/logs/x.log
tar -cf backup/p.tar --exclude='*.log' project
ls -R project | LC_ALL=C sort > backup/contents.txt
`,
  heredocs: `cat > a.py <<'EOF'
import sys
if True:
    print("$HOME is literal", sys.argv[1:])

print('EOF is not alone here')
EOF
NAME=world
cat > b.txt <<EOF
hello $NAME
EOF
cat <<-	TABS > c.txt
	tab-indented
	TABS
cat <<A > d.txt; cat <<"B" > e.txt
first
A
second $NAME
B
cat a.py b.txt c.txt d.txt e.txt
`,
  functions: `greet() {
  echo "hi $1"
}
function shout {
  echo "HI"
}
later()
{
  echo later
}
greet you
shout
later
`,
  control: `for f in a b c; do
  echo "$f" >> list.txt
done
i=0
while [ "$i" -lt 3 ]
do
  i=$((i + 1))
done
echo "i=$i"
if [ -f list.txt ]; then
  echo yes
elif true; then
  echo no
else
  echo never
fi
case "$i" in
  1|2) echo small ;;
  (3) echo three ;;
  *) echo big ;;
esac
for ((k = 0; k < 2; k++)); do echo "k$k"; done
until [ "$i" -eq 0 ]; do i=$((i - 1)); done
`,
  continuations: `echo one \\
  two
true &&
  echo and
false ||
  echo or
printf 'b\\na\\n' |
  sort |
  tr a-z A-Z
{ echo grouped; echo twice; } > group.txt
(cd /tmp && pwd >/dev/null)
cat group.txt
`,
  state: `mkdir -p work/sub
cd work
X=42
export Y=7
echo "$X $Y" > sub/vals.txt
cd sub
cat vals.txt
arr=()
arr+=(one two)
echo "\${#arr[@]} \${arr[1]}"
`,
  quoting: `echo "a # not a comment" # a comment with 'quotes" in it
echo a#b
echo 'single ) ( } { quotes'
echo $'ansi \\' quote' done
echo "multi
line ) string"
echo "nested $(echo "inner ) paren" | tr a-z A-Z) \`echo tick\`"
x=$(case y in y) echo matched ;; esac)
echo "$x"
awk '{ print $1 }' <<< "first second"
[[ "abc" =~ ^(a|b)c?$ ]] || echo no-match
diff <(printf 'x\\n') <(printf 'x\\n') && echo same
echo "\${HOME:+home is set}" | wc -c
`,
  comments: `# Step one: make things
mkdir -p out

# Step two: fill them
echo data > out/file.txt
# trailing comment
`,
}

describe("planSolution: statements", () => {
  it("drops the shebang and set preamble and cuts one statement per turn", () => {
    expect(steps(SPLIT.synthetic ?? "")).toEqual([
      "mkdir -p backup project/logs",
      "printf 'a\\nb\\n' > project/logs/x.log",
      "tar -cf backup/p.tar --exclude='*.log' project",
      "ls -R project | LC_ALL=C sort > backup/contents.txt",
    ])
  })

  it("keeps heredocs with their command, also two on one line", () => {
    const s = steps(SPLIT.heredocs ?? "")
    expect(s[0]).toBe(
      "cat > a.py <<'EOF'\nimport sys\nif True:\n    print(\"$HOME is literal\", sys.argv[1:])\n\nprint('EOF is not alone here')\nEOF",
    )
    expect(s).toContain('cat <<A > d.txt; cat <<"B" > e.txt\nfirst\nA\nsecond $NAME\nB')
    expect(s).toHaveLength(6)
  })

  it("keeps functions, loops, ifs and cases whole", () => {
    expect(steps(SPLIT.functions ?? "")).toEqual([
      'greet() {\n  echo "hi $1"\n}',
      'function shout {\n  echo "HI"\n}',
      "later()\n{\n  echo later\n}",
      "greet you",
      "shout",
      "later",
    ])
    const control = steps(SPLIT.control ?? "")
    expect(control[0]).toBe('for f in a b c; do\n  echo "$f" >> list.txt\ndone')
    expect(control[2]).toBe('while [ "$i" -lt 3 ]\ndo\n  i=$((i + 1))\ndone')
    expect(control[5]).toContain("esac")
    expect(control).toHaveLength(8)
  })

  it("follows continued lines", () => {
    expect(steps(SPLIT.continuations ?? "").slice(0, 4)).toEqual([
      "echo one \\\n  two",
      "true &&\n  echo and",
      "false ||\n  echo or",
      "printf 'b\\na\\n' |\n  sort |\n  tr a-z A-Z",
    ])
  })

  it("attaches comments to the next statement and trailing ones to the last", () => {
    expect(steps(SPLIT.comments ?? "")).toEqual([
      "# Step one: make things\nmkdir -p out",
      "# Step two: fill them\necho data > out/file.txt\n# trailing comment",
    ])
  })

  it("an empty or comment-only script has no steps", () => {
    expect(planSolution("")).toEqual({ kind: "steps", steps: [] })
    expect(planSolution("#!/bin/bash\nset -e\n# nothing to do\n\n")).toEqual({
      kind: "steps",
      steps: [],
    })
  })

  it("accepts CRLF scripts", () => {
    expect(steps("echo a\r\necho b\r\n")).toEqual(["echo a", "echo b"])
  })

  it(`merges more than ${MAX_SOLUTION_STEPS} statements into that many turns, in order`, () => {
    const script = Array.from({ length: 40 }, (_, k) => `echo ${k}`).join("\n")
    const s = steps(script)
    expect(s).toHaveLength(MAX_SOLUTION_STEPS)
    expect(s.join("\n")).toBe(script)
    const echo = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, k) => `echo ${from + k}`).join("\n")
    expect(planSolution(script, 3)).toEqual({
      kind: "steps",
      steps: [echo(0, 13), echo(13, 26), echo(26, 40)],
    })
    // 18 statements in 16 turns: two turns of two.
    const eighteen = Array.from({ length: 18 }, (_, k) => `echo ${k}`).join("\n")
    expect(steps(eighteen).map((t) => t.split("\n").length)).toEqual([
      1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 2,
    ])
  })

  it.each(Object.entries(SPLIT))(
    "%s: the turns do in a persistent shell what the script does",
    (_, script) => {
      const commands = steps(script)
      checkSyntax(commands)
      compare(script, commands)
    },
  )
})

describe("planSolution: whole script", () => {
  const WHOLE: Array<[string, string, RegExp]> = [
    ["exit", "echo a\nif true; then exit 0; fi\n", /^exit at line 2$/],
    ["return", "echo a\nreturn 1\n", /^return at line 2$/],
    ["positional", 'echo "$1"\n', /positional/],
    ["positional braces", `echo \${2:-x}\n`, /positional/],
    ["argument count", "echo $#\n", /positional/],
    ["$0", 'cd "$(dirname "$0")"\n', /use of \$0/],
    ["$0 in a function", 'f() { echo "$0"; }\n', /use of \$0/],
    ["exit in a function", "f() {\n  exit 1\n}\n", /^exit at line 2$/],
    ["positional after a function", 'f() { echo "$1"; }\necho "$1"\n', /positional/],
    ["$@ in an unquoted heredoc", "cat <<EOF\n$@\nEOF\n", /positional parameters in a heredoc/],
    ["$0 in a heredoc in a function", "f() {\n  cat <<EOF\n$1 $0\nEOF\n}\n", /in a heredoc/],
    ["BASH_SOURCE", `echo "\${BASH_SOURCE[0]}"\n`, /BASH_SOURCE/],
    ["errexit later", "echo a\nset -e\necho b\n", /^set -e at line 2$/],
    ["set -o errexit later", "echo a\nset -o errexit\n", /set -o errexit/],
    ["positional set", "set -- a b\n", /set --/],
    ["shift", "shift\n", /shift/],
    ["exec", "exec > log.txt\n", /exec/],
    ["trap", "trap 'rm -f x' EXIT\n", /trap/],
    ["python shebang", "#!/usr/bin/env python3\nprint(1)\n", /not a bash script/],
    ["unclosed quote", "echo 'oops\n", /unclosed single quote/],
    ["unclosed double quote", 'echo "oops\n', /unclosed double quote/],
    ["unclosed heredoc", "cat <<EOF\nnever closed\n", /heredoc never closed by EOF/],
    ["unclosed if", "if true; then\n  echo\n", /missing fi/],
    ["stray fi", "fi\n", /unmatched fi/],
    ["dangling pipe", "echo a |\n", /continued past the end/],
  ]

  it.each(WHOLE)("%s", (_, script, reason) => {
    const plan = planSolution(script)
    expect(plan.kind).toBe("whole")
    if (plan.kind === "whole") {
      expect(plan.reason).toMatch(reason)
      expect(plan.command).toBe(
        `cat > ${SOLUTION_FILE} <<'T1_SOLUTION'\n${script}T1_SOLUTION\nbash ${SOLUTION_FILE}`,
      )
    }
    expect(solutionCommands(script)).toHaveLength(1)
  })

  it("allows what is harmless in a persistent shell", () => {
    for (const script of [
      "awk '{print $1}' f\n",
      "echo '$1 $@ exit'\n",
      "echo exit\n",
      "(exit 3) || echo sub\n",
      "x=$(exit 0)\n",
      "set -o pipefail\n",
      "set -x # trace from here\n",
      "f() {\n  cat <<EOF\n$1 and $2\nEOF\n}\n",
      "echo a\nset -x\nset +e\n",
      "cat <<'EOF'\n$1\nEOF\n",
      "echo \\$1\n",
      `echo \${#HOME}\n`,
      'f() {\n  local a="$1"; shift\n  echo "$a $# $@"\n  return 0\n}\n',
      `g() (\n  echo "\${1:-none}"\n)\n`,
      "h() {\n  cat <<EOF\n$1\nEOF\n}\n",
    ]) {
      expect({ script, kind: planSolution(script).kind }).toEqual({ script, kind: "steps" })
    }
  })

  it("picks a delimiter the script does not contain", () => {
    const plan = planSolution("echo hi\nT1_SOLUTION\nexit 0")
    expect(plan.kind === "whole" && plan.command).toBe(
      `cat > ${SOLUTION_FILE} <<'T1_SOLUTION_2'\necho hi\nT1_SOLUTION\nexit 0\nT1_SOLUTION_2\nbash ${SOLUTION_FILE}`,
    )
  })

  it("the whole-script command runs the script as bash would", () => {
    const script =
      '#!/bin/bash\nset -e\necho "args: $#"\nmkdir -p made\necho ok > made/x\nexit 0\necho never\n'
    const plan = planSolution(script)
    if (plan.kind !== "whole") throw new Error("expected whole")
    const file = join(root, "whole-solution.sh")
    const command = plan.command.replaceAll(SOLUTION_FILE, file)
    const dir = join(root, "whole")
    mkdirSync(dir)
    const out = execFileSync(
      "bash",
      ["--noprofile", "--norc", "-c", `eval -- ${squote(command)} </dev/null; echo "shell lives"`],
      {
        cwd: dir,
        env,
        encoding: "utf8",
      },
    )
    expect(out).toBe("args: 0\nshell lives\n")
    expect(readFileSync(file, "utf8")).toBe(script)
    expect(readFileSync(join(dir, "made", "x"), "utf8")).toBe("ok\n")
  })
})

describe("planSolution properties", () => {
  it("never throws, and steps keep every non-blank line of the script in order", () => {
    const piece = fc.constantFrom(
      "echo a",
      "cat <<EOF",
      "EOF",
      "if true; then",
      "fi",
      "for x in 1; do",
      "done",
      "case a in",
      "a) echo;;",
      "esac",
      "{",
      "}",
      "(",
      ")",
      "'",
      '"',
      "`",
      "$(",
      "\\",
      "|",
      "&&",
      "# c",
      "",
      "f() {",
      "x=()",
    )
    fc.assert(
      fc.property(
        fc.array(fc.oneof(piece, fc.string({ maxLength: 6 })), { maxLength: 20 }),
        (parts) => {
          const script = parts.join("\n")
          const plan = planSolution(script)
          if (plan.kind === "whole") {
            expect(plan.command).toContain(script)
            return
          }
          const nonBlank = (s: string) => s.split("\n").filter((l) => l.trim() !== "")
          const lines = nonBlank(script.replace(/\r\n/g, "\n"))
          if (plan.steps.length === 0) {
            // Only comments, blank lines and the preamble: nothing to run.
            for (const line of lines) expect(line).toMatch(/^\s*(#|set\s)/)
          } else expect(nonBlank(plan.steps.join("\n"))).toEqual(lines)
          for (const step of plan.steps) expect(step.trim()).not.toBe("")
        },
      ),
      { numRuns: 1000 },
    )
  })
})

describe("planSolution on generated scripts", () => {
  const word = fc.constantFrom("a", "b c", "'q ) ('", '"d # e"', "\\$HOME", "'}'", "x{1,2}", "é")
  const value = fc.constantFrom("a", "'b c'", '"d # e"', "x{1,2}", "$HOME", "'a)'")
  const simple = fc.oneof(
    word.map((w) => `echo ${w}`),
    value.map((v) => `X=${v}`),
    fc.constant('echo "[$X]"'),
    word.map((w) => `printf '%s\\n' ${w} >> out.txt`),
    fc.constant("cat out.txt 2>/dev/null | wc -l"),
  )
  /** A command that can stand inside a block (no heredoc, comment or blank line). */
  const command: (depth: number) => fc.Arbitrary<string> = (depth) =>
    depth === 0
      ? simple
      : fc.oneof(
          { weight: 3, arbitrary: simple },
          { weight: 1, arbitrary: command(depth - 1).map((s) => `if true; then\n  ${s}\nfi`) },
          { weight: 1, arbitrary: command(depth - 1).map((s) => `for v in 1 2; do\n  ${s}\ndone`) },
          {
            weight: 1,
            arbitrary: fc
              .tuple(command(depth - 1), command(depth - 1))
              .map(([a, b]) => `{ ${a}; ${b}; } >> out.txt`),
          },
          { weight: 1, arbitrary: command(depth - 1).map((s) => `fn() {\n  ${s}\n}\nfn`) },
          {
            weight: 1,
            arbitrary: fc
              .tuple(value, command(depth - 1))
              .map(([v, s]) => `X=${v}\ncase $X in\n  a) ${s} ;;\n  *) echo other ;;\nesac`),
          },
          { weight: 1, arbitrary: command(depth - 1).map((s) => `true &&\n  ${s}`) },
          { weight: 1, arbitrary: simple.map((s) => `${s} |\n  cat`) },
          { weight: 1, arbitrary: simple.map((s) => `Y=$(${s})\necho "$Y"`) },
        )
  const statement = fc.oneof(
    { weight: 6, arbitrary: command(2) },
    { weight: 1, arbitrary: word.map((w) => `cat > f.txt <<'EOF'\n${w} $X\n\nEOF`) },
    { weight: 1, arbitrary: word.map((w) => `cat <<EOF >> out.txt\n$X ${w}\nEOF`) },
    { weight: 1, arbitrary: word.map((w) => `# comment ${w}`) },
    { weight: 1, arbitrary: fc.constant("") },
  )

  it("the turns are each valid bash and do what the script does", () => {
    fc.assert(
      fc.property(fc.array(statement, { minLength: 1, maxLength: 8 }), (statements) => {
        const script = `#!/bin/bash\nset -e\n${statements.join("\n")}\n`
        const commands = steps(script)
        checkSyntax(commands)
        compare(script, commands)
      }),
      { numRuns: 15 },
    )
  })
})
