import { describe, expect, it } from "vitest"
import { pristineMatcher, pristinePathsProblem } from "./pristine.ts"

describe("pristine path patterns", () => {
  const place = pristineMatcher([
    "/usr/lib/python3*/dist-packages",
    "/usr/local/lib/python3.1*/site-packages",
  ])

  it("places paths under a pattern, above one, or elsewhere; * stays within a component", () => {
    expect(place("/usr/lib/python3/dist-packages")).toBe("under")
    expect(place("/usr/lib/python3.11/dist-packages/pytest/__init__.py")).toBe("under")
    expect(place("/usr/local/lib/python3.12/site-packages/x.pth")).toBe("under")
    expect(place("/usr")).toBe("ancestor")
    expect(place("/usr/lib/python3")).toBe("ancestor")
    expect(place("/usr/local/lib")).toBe("ancestor")
    expect(place("/usr/lib/python3/other")).toBeUndefined()
    expect(place("/usr/lib/python3/x/dist-packages")).toBeUndefined()
    expect(place("/usr/local/lib/python3.9/site-packages/x.py")).toBeUndefined()
    expect(place("/usr/lib/python3.dist-packages")).toBe("ancestor")
    expect(place("/app/dist-packages")).toBeUndefined()
    // Regular-expression characters in a pattern are themselves.
    expect(pristineMatcher(["/a.b/c+"])("/axb/c+")).toBeUndefined()
    expect(pristineMatcher(["/a.b/c+"])("/a.b/c+/d")).toBe("under")
  })

  it("refuses a pattern that is relative, climbs, or is the root, naming the field", () => {
    for (const bad of [["relative"], ["/a/../b"], ["/a/./b"], ["/"], ["/a\0b"], ["/ok", "x"]]) {
      const problem = pristinePathsProblem(bad)
      expect(problem?.field).toBe("pristinePaths")
    }
    expect(pristinePathsProblem(["/usr/lib/python3*/dist-packages"])).toBeUndefined()
    expect(pristinePathsProblem([])).toBeUndefined()
  })
})
