import { afterEach, describe, expect, it } from "vitest"
import { defaultBwrapCache } from "./rootfs.ts"

describe("bwrap image cache", () => {
  const saved = process.env.T1_BWRAP_CACHE
  afterEach(() => {
    if (saved === undefined) delete process.env.T1_BWRAP_CACHE
    else process.env.T1_BWRAP_CACHE = saved
  })

  it("lives under /var/cache/t1/bwrap unless T1_BWRAP_CACHE names another place", () => {
    delete process.env.T1_BWRAP_CACHE
    expect(defaultBwrapCache()).toBe("/var/cache/t1/bwrap")
    process.env.T1_BWRAP_CACHE = "/srv/t1-cache"
    expect(defaultBwrapCache()).toBe("/srv/t1-cache")
    // Set but empty, as a blank line in an env file leaves it: the default.
    process.env.T1_BWRAP_CACHE = ""
    expect(defaultBwrapCache()).toBe("/var/cache/t1/bwrap")
  })
})
