import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { openArchive, overlayFiles, packDirectory } from "./archive.ts"

const root = mkdtempSync(join(tmpdir(), "t1-tar-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

const bytes = (text: string) => new TextEncoder().encode(text)

describe("overlayFiles", () => {
  it("lays files over an archive: replaced entries once, the rest kept, as GNU tar unpacks it", async () => {
    const src = join(root, "src")
    mkdirSync(join(src, "sub"), { recursive: true })
    writeFileSync(join(src, "test_a.py"), "def test_a(): pass\n")
    writeFileSync(join(src, "sub", "conftest.py"), "# task's\n")
    const base = await packDirectory(src)
    const combined = await overlayFiles(base.tar, [
      { path: "sub/conftest.py", bytes: bytes("# the verifier's\n") },
      { path: "test_zz_canary.py", bytes: bytes("def test_canary(): pass\n") },
    ])
    const opened = await openArchive(combined)
    expect([...opened.files].sort()).toEqual(["sub/conftest.py", "test_a.py", "test_zz_canary.py"])
    const listing = execFileSync("tar", ["-tvf", "-"], { input: combined }).toString()
    // one entry per path: the task's conftest is left out, not shadowed
    expect(listing.match(/conftest\.py/g)).toHaveLength(1)
    const out = join(root, "out")
    mkdirSync(out)
    execFileSync("tar", ["-x", "-f", "-", "-C", out], { input: combined })
    expect(readFileSync(join(out, "sub", "conftest.py"), "utf8")).toBe("# the verifier's\n")
    expect(readFileSync(join(out, "test_a.py"), "utf8")).toBe("def test_a(): pass\n")
    expect(statSync(join(out, "test_zz_canary.py")).mode & 0o777).toBe(0o600)
  })

  it("a path written with ./ still replaces the archive's entry", async () => {
    const src = join(root, "dot")
    mkdirSync(src)
    writeFileSync(join(src, "run.sh"), "echo task\n")
    const base = await packDirectory(src)
    const combined = await overlayFiles(base.tar, [{ path: "./run.sh", bytes: bytes("echo t1\n") }])
    const listing = execFileSync("tar", ["-tf", "-"], { input: combined }).toString()
    expect(listing.split("\n").filter((l) => l.endsWith("run.sh"))).toHaveLength(1)
    const read = await (await openArchive(combined)).read("run.sh")
    expect(new TextDecoder().decode(read)).toBe("echo t1\n")
  })
})
