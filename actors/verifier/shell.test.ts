import { spawnSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { inFreshShell } from "./shell.ts"

/** Runs `command` as the episode's shell would: bash -c, with `env` as its environment. */
const run = (command: string, env: Record<string, string>) => {
  const r = spawnSync("bash", ["--noprofile", "--norc", "-c", command], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env },
    encoding: "utf8",
  })
  return { status: r.status, out: r.stdout }
}

describe("inFreshShell", () => {
  it("runs the script with the episode's variables, its status and its output", () => {
    const r = run(inFreshShell(`echo "v=$KEEP"; echo 'quote'"'"'s'; exit 3`), { KEEP: "yes" })
    expect(r.out).toBe("v=yes\nquote's\n")
    expect(r.status).toBe(3)
  })

  it("drops the hazardous variables", () => {
    const r = run(inFreshShell(`echo "[$PYTEST_ADDOPTS][$BASH_ENV]"`), {
      PYTEST_ADDOPTS: "-p evil",
      BASH_ENV: "/tmp/evil",
    })
    expect(r.out).toBe("[][]\n")
  })

  it("neither the script nor its children see an exported function", () => {
    const fn = { "BASH_FUNC_t1fn%%": "() { echo hijacked; }", KEEP: "k" }
    const r = run(
      inFreshShell(
        `type -t t1fn || echo none; bash -c 'type -t t1fn || echo none'; env | grep -c BASH_FUNC_; echo "$KEEP"`,
      ),
      fn,
    )
    expect(r.out).toBe("none\nnone\n0\nk\n")
  })

  it("leaves none of its own variables or arguments to the script", () => {
    const r = run(inFreshShell(`echo "[$#][$1][$__t1_u][$__t1_kv]"`), {})
    expect(r.out).toBe("[0][][][]\n")
  })

  it("an alias or function named env in the episode's shell does not stand in for env", () => {
    const r = run(`env() { echo hijacked; }; ${inFreshShell("echo ran")}`, {})
    expect(r.out).toBe("ran\n")
  })
})
