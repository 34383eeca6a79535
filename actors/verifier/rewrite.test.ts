import { execFileSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { planTestScript, type ScriptPlan } from "./rewrite.ts"
import { logicalLines } from "./shell-words.ts"

const inputs = (files: Readonly<Record<string, string>> = {}) => ({
  testDir: "/tests",
  readTestFile: (path: string) => files[path],
})
const render = (plan: ScriptPlan) => {
  if (plan.kind !== "rewrite") throw new Error(`expected a rewrite, got: ${plan.reason}`)
  return plan.render({
    python: "python3",
    report: (i) => `/s/report-${i}.xml`,
    config: "/dev/null",
  })
}
/** bash -n: the rewritten script still parses. */
const parses = (script: string) => {
  execFileSync("bash", ["-n"], { input: script })
  return true
}

const TB2 = `#!/bin/bash

apt-get update
apt-get install -y curl

curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh

source $HOME/.local/bin/env

# Check if we're in a valid working directory
if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set. Please set a WORKDIR in your Dockerfile before running this script."
    exit 1
fi

uvx \\
  -p 3.13 \\
  -w pytest==8.4.1 \\
  -w pytest-json-ctrf==0.3.5 \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA


if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
`

describe("planTestScript", () => {
  it("rewrites the TB2 curl + uv + uvx script: bootstrap removed, the rest kept in order", () => {
    const plan = planTestScript(TB2, inputs())
    expect(plan.kind).toBe("rewrite")
    if (plan.kind !== "rewrite") return
    expect(plan.requirements).toEqual([])
    expect(plan.calls).toBe(1)
    expect(plan.removed).toEqual([
      "apt-get update",
      "apt-get install -y curl",
      "curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh",
      "source $HOME/.local/bin/env",
    ])
    expect(plan.notes.join("\n")).toContain("Python 3.13")
    const out = render(plan)
    expect(parses(out)).toBe(true)
    const lines = out.split("\n")
    // Untouched lines are byte for byte what the author wrote, in their places.
    for (const kept of [
      "# Check if we're in a valid working directory",
      'if [ "$PWD" = "/" ]; then',
      "if [ $? -eq 0 ]; then",
      "  echo 1 > /logs/verifier/reward.txt",
    ])
      expect(lines).toContain(kept)
    const call = lines.find((l) => l.includes("pytest.console_main")) ?? ""
    expect(call).toContain("/tests/test_outputs.py -rA")
    expect(call).toContain("--junitxml='/s/report-0.xml'")
    expect(call).toContain("--confcutdir='/tests'")
    expect(call).not.toContain("--ctrf")
    expect(out).not.toMatch(/apt-get|curl|uvx|\.local\/bin\/env/)
    expect(out.indexOf("pytest.console_main")).toBeLessThan(out.indexOf("if [ $? -eq 0 ]"))
  })

  it("names the extra packages as requirements; runner and reporter plugins are not", () => {
    const script = TB2.replace(
      "-w pytest-json-ctrf==0.3.5 \\",
      "-w pytest-json-ctrf==0.3.5 -w numpy==2.3.2,scipy \\",
    )
    const plan = planTestScript(script, inputs())
    expect(plan.kind === "rewrite" && plan.requirements).toEqual([
      { kind: "python", name: "numpy", spec: "numpy==2.3.2" },
      { kind: "python", name: "scipy", spec: "scipy" },
    ])
  })

  it("uv venv + uv pip install + uv run pytest; pip -r reads the tests' requirements file", () => {
    const script = `#!/bin/bash
set -euo pipefail
DEBIAN_FRONTEND=noninteractive apt-get install -y curl jq > /dev/null
curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh
source $HOME/.local/bin/env
uv venv .tbench-testing
source .tbench-testing/bin/activate
uv pip install pytest==8.4.1 requests -r /tests/requirements.txt
cd /app && uv run --with pytest-timeout pytest "$TEST_DIR/test_outputs.py" -rA --timeout 60 2>&1 | tee /tmp/log
jq . /app/out.json
`
    const plan = planTestScript(script, inputs({ "requirements.txt": "# pinned\nPyYAML>=6\n\n" }))
    expect(plan.kind === "rewrite" && plan.requirements.map((r) => `${r.kind}:${r.name}`)).toEqual([
      "system:jq",
      "python:requests",
      "python:PyYAML",
      "python:pytest-timeout",
    ])
    const out = render(plan)
    expect(parses(out)).toBe(true)
    expect(out).toContain("DEBIAN_FRONTEND=noninteractive :")
    const call = out.split("\n").find((l) => l.includes("console_main")) ?? ""
    expect(call.startsWith("cd /app && 'python3' -c")).toBe(true)
    expect(call).toContain('"$TEST_DIR/test_outputs.py" -rA --timeout 60 2>&1')
    expect(call.endsWith("| tee /tmp/log")).toBe(true)
    expect(out).toContain("jq . /app/out.json")
  })

  it("TB1's uv init + uv add pytest + uv run pytest $TEST_DIR/…, and pip + python -m pytest", () => {
    const tb1 = `#!/bin/bash
apt-get update
apt-get install -y curl
curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh
source $HOME/.local/bin/env
uv init
uv add pytest==8.4.1
uv run pytest $TEST_DIR/test_outputs.py -rA
`
    const out = render(planTestScript(tb1, inputs()))
    expect(out).toContain("$TEST_DIR/test_outputs.py -rA -p no:cacheprovider")
    expect(out).toContain("--confcutdir='/tests'")
    const pip = `apt-get update && apt-get install -y python3-pip
pip install --break-system-packages pytest==8.2.0
cd "$TEST_DIR"
python3 -m pytest test_outputs.py -rA
`
    const plan = planTestScript(pip, inputs())
    const rendered = render(plan)
    expect(rendered.split("\n")[0]).toBe(": && :")
    // A relative test path: pytest's own discovery, not confined to /tests.
    expect(rendered).not.toContain("--confcutdir")
  })

  it("keeps reserved words around a rewritten call and several calls get their own reports", () => {
    const script = `pip install pytest
if uvx pytest /tests/test_a.py; then echo ok; fi
! pytest /tests/test_b.py -x || echo second failed
`
    const plan = planTestScript(script, inputs())
    expect(plan.kind === "rewrite" && plan.calls).toBe(2)
    const out = render(plan)
    expect(parses(out)).toBe(true)
    expect(out).toMatch(/^if 'python3' -c .* --junitxml='\/s\/report-0.xml'.*; then echo ok ; fi$/m)
    expect(out).toMatch(
      /^! 'python3' -c .*\/tests\/test_b.py -x .*report-1.xml.* \|\| echo second failed$/m,
    )
  })

  it("adds the verifier's extra test file to the calls that name their tests, and --maxfail to all", () => {
    const script = `pip install pytest
pytest /tests/test_a.py -x
pytest -k fast /tests/test_b.py
cd /app && pytest -rA
pytest "$TEST_DIR/test_c.py" --maxfail=2
`
    const plan = planTestScript(script, inputs())
    if (plan.kind !== "rewrite") throw new Error(plan.reason)
    // -k selects tests away (a canary would be deselected); a call without paths discovers its
    // tests itself, and one more path would replace that discovery.
    expect(plan.runsExtra).toEqual([true, false, false, true])
    const out = plan.render({
      python: "python3",
      report: (i) => `/s/report-${i}.xml`,
      config: "/dev/null",
      extraTest: "/tests/test_rows_0a1b2c.py",
    })
    expect(parses(out)).toBe(true)
    const calls = out.split("\n").filter((l) => l.includes("console_main"))
    expect(calls.map((c) => c.includes("'/tests/test_rows_0a1b2c.py'"))).toEqual([
      true,
      false,
      false,
      true,
    ])
    // After the call's own -x or --maxfail, so that it wins.
    for (const c of calls) expect(c).toMatch(/ --maxfail=1000000000 /)
    expect(calls[0]?.indexOf("-x")).toBeLessThan(calls[0]?.indexOf("--maxfail=1000000000") ?? 0)
    expect(calls[3]?.indexOf("--maxfail=2")).toBeLessThan(
      calls[3]?.indexOf("--maxfail=1000000000") ?? 0,
    )
    // Without the option nothing is added.
    expect(render(plan)).not.toContain("test_rows_0a1b2c")
  })

  it("runs as written, saying why, what it cannot rewrite safely or has nothing to rewrite", () => {
    const reasonOf = (script: string, files: Record<string, string> = {}) => {
      const plan = planTestScript(script, inputs(files))
      return plan.kind === "as-is" ? plan.reason : "rewritten"
    }
    expect(reasonOf("python3 -m pytest /tests -rA\n")).toContain(
      "installs nothing over the network",
    )
    expect(reasonOf("pip install requests\n./run_checks.sh\n")).toContain("no pytest call")
    expect(reasonOf("pip install x\necho $(pytest /tests)\n")).toContain("command substitution")
    expect(reasonOf("pip install x\nbash -c 'pytest /tests'\n")).toContain("through bash")
    expect(reasonOf("pip install -e /app\npytest /tests\n")).toContain("editable")
    expect(reasonOf("pip install -r reqs.txt\npytest /tests\n")).toContain(
      "not among the test files",
    )
    expect(reasonOf("uv sync\nuv run pytest /tests\n")).toContain("uv sync")
    expect(reasonOf("npm ci\nuvx pytest /tests\n")).toContain("npm")
    expect(reasonOf("uvx --weird-flag pytest /tests\n")).toContain("--weird-flag")
    expect(reasonOf("uvx ruff check /app\n")).toContain("not pytest")
    expect(reasonOf("pip install x\necho 'unterminated\n")).toContain("cannot parse")
    expect(reasonOf("pip install x\ncat <<EOF | python3 -m pytest\nbody\nEOF\n")).toContain(
      "here-document",
    )
  })

  it("keeps a curl that is part of the test, and asks for curl when the bootstrap installed it", () => {
    const script = `apt-get install -y curl
uvx pytest /tests/test_server.py
curl -s http://localhost:8080/health
`
    const plan = planTestScript(script, inputs())
    expect(plan.kind === "rewrite" && plan.requirements).toEqual([
      { kind: "system", name: "curl", spec: "curl" },
    ])
    expect(render(plan)).toContain("curl -s http://localhost:8080/health")
  })
})

describe("logicalLines", () => {
  it("joins continuations, skips comments, keeps quotes and here-document bodies", () => {
    const script = `echo "a # not a comment" \\
  'b c' # a comment
cat <<'EOF' > f
$(not run) pytest
EOF
x=1; y=2 && z 2>&1 | tee log &
`
    const lines = logicalLines(script)
    expect(lines.map((l) => l.tokens.map((t) => t.raw))).toEqual([
      ["echo", '"a # not a comment"', "'b c'"],
      ["cat", "<<'EOF'", ">", "f"],
      ["x=1", ";", "y=2", "&&", "z", "2>&1", "|", "tee", "log", "&"],
    ])
    expect(lines[1]?.heredoc).toBe(true)
    expect(script.slice(lines[1]?.start, lines[1]?.end)).toContain("$(not run) pytest\nEOF\n")
  })
})
