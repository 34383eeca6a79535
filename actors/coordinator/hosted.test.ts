import { describe, expect, it } from "vitest"
import { subjectsFor } from "../../services/bus/index.ts"
import { coordinatorActor } from "./index.ts"

describe("t1 actor coordinator --driver", () => {
  const context = { subjects: subjectsFor("coordflags"), concurrency: 1, shutdownGraceMs: 1000 }

  it("takes docker, local, bwrap or auto and refuses anything else", () => {
    for (const driver of ["docker", "local", "bwrap", "auto"])
      expect(() => coordinatorActor.run(context, { driver })).not.toThrow()
    expect(() => coordinatorActor.run(context, { driver: "podman" })).toThrow(
      '--driver must be docker, local, bwrap or auto, got "podman"',
    )
  })
})
