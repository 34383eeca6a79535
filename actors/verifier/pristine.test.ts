import { describe, expect, it } from "vitest"
import type { TestCaseResult } from "./outcome.ts"
import { blamePristine, moduleOf } from "./pristine.ts"

const failed = (name: string, message: string): TestCaseResult => ({
  name,
  outcome: "failed",
  durationMs: 0,
  message,
})

describe("moduleOf", () => {
  it("names the top-level module of a site-directory file", () => {
    expect(moduleOf("/usr/local/lib/python3.11/dist-packages/requests/api.py")).toBe("requests")
    expect(moduleOf("/usr/lib/python3/dist-packages/six.py")).toBe("six")
    expect(
      moduleOf("/usr/local/lib/python3.11/site-packages/_yaml.cpython-311-x86_64-linux-gnu.so"),
    ).toBe("_yaml")
  })

  it("metadata and files outside site directories name no module", () => {
    expect(
      moduleOf("/usr/lib/python3/dist-packages/requests-2.31.0.dist-info/RECORD"),
    ).toBeUndefined()
    expect(moduleOf("/usr/lib/python3/dist-packages/distutils-precedence.pth")).toBeUndefined()
    expect(moduleOf("/app/solution.py")).toBeUndefined()
  })
})

describe("blamePristine", () => {
  const files = [
    "/usr/local/lib/python3.11/dist-packages/requests/__init__.py",
    "/usr/local/lib/python3.11/dist-packages/requests-2.31.0.dist-info/METADATA",
  ]

  it("names the tests that failed importing what the agent installed", () => {
    const notes = blamePristine(
      [
        failed("test_a.py::test_get", "ModuleNotFoundError: No module named 'requests'"),
        failed(
          "test_a.py::test_adapters",
          "ImportError: cannot import name 'HTTPAdapter' from 'requests.adapters'",
        ),
        failed("test_a.py::test_math", "assert 1 == 2"),
        { name: "test_a.py::test_ok", outcome: "passed", durationMs: 0, message: "" },
      ],
      files,
    )
    expect(notes).toHaveLength(1)
    expect(notes[0]).toMatch(
      /^test_a\.py::test_get, test_a\.py::test_adapters failed importing requests/,
    )
  })

  it("says nothing when no failure is about those modules, or nothing was restored", () => {
    const tests = [failed("t::x", "No module named 'numpy'")]
    expect(blamePristine(tests, files)).toEqual([])
    expect(blamePristine([failed("t::x", "No module named 'requests'")], [])).toEqual([])
  })
})
