/**
 * The verification benches' task: five pytest tests over /app/out1..5.txt, of which the honest
 * step (`HONEST`) makes two pass, so a verification scores 2/5.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"

const TESTS = `from pathlib import Path

def check(i):
    assert Path(f"/app/out{i}.txt").read_text().strip() == str(i), f"out{i}.txt is wrong"

def test_1(): check(1)
def test_2(): check(2)
def test_3(): check(3)
def test_4(): check(4)
def test_5(): check(5)
`

/** The agent's one command: writes out1.txt and out2.txt. */
export const HONEST = "for i in 1 2; do echo $i > /app/out$i.txt; done"

/** Writes the tests under `hostDir`/tests and returns the task (id `id`) that verifies with them. */
export const writePytestTask = (hostDir: string, id: string) => {
  const testsDir = join(hostDir, "tests")
  mkdirSync(testsDir)
  writeFileSync(join(testsDir, "test_work.py"), TESTS)
  return {
    id,
    environment: { allowInternet: false, workdir: "/app" },
    verifier: {
      testsDir,
      testDir: "/tests",
      kind: "pytest" as const,
      script: undefined,
      scriptPath: undefined,
      parser: undefined,
      timeoutSec: 60,
      expectedTests: 5,
    },
  }
}
