import { openArchive, packFiles } from "../../../services/tar/index.ts"
import {
  ACCEPTED,
  crash,
  describeError,
  type FuzzTarget,
  REJECTED,
  type Verdict,
} from "../harness.ts"
import { mutateBytes, toHex } from "../mutate.ts"
import type { Random } from "../random.ts"

/**
 * The tests archive a VerifyRequest carries inline (task.test_files.tar), through the verifier's
 * openArchive and a read of one file, as the verifier does before running tests. The verifier
 * wraps a rejection into an INVALID_ARGUMENT reply (Effect.tryPromise), so here a rejection must
 * be an Error with a message; a hang or a non-Error is a crash.
 */
const archive = async (rng: Random): Promise<Uint8Array> => {
  const files: Record<string, string | Uint8Array> = {}
  for (let n = rng.range(1, 3); n > 0; n--)
    files[
      rng.pick(["test_outputs.py", "run-tests.sh", "data/x.txt", "../escape", "a".repeat(120)])
    ] = rng.bool() ? rng.text(200) : rng.bytes(rng.size(1500))
  const valid = new Uint8Array(await packFiles(files))
  const roll = rng.int(10)
  if (roll < 2) return valid
  if (roll < 9) return mutateBytes(rng, valid)
  return rng.bytes(rng.size(2048))
}

const open = async (tar: Uint8Array): Promise<Verdict> => {
  try {
    const opened = await openArchive(tar)
    await opened.read("test_outputs.py")
    return ACCEPTED
  } catch (e) {
    return e instanceof Error && e.message !== ""
      ? REJECTED
      : crash(`rejected with ${describeError(e)}`)
  }
}

export const testsArchiveTarget: FuzzTarget = {
  name: "tests archive",
  description: "tar archives (packFiles output, mutated, random) → openArchive, read (verifier)",
  make: (rng) => {
    let tar: Uint8Array = new Uint8Array(0)
    return {
      input: () => toHex(tar),
      run: async () => {
        tar = await archive(rng)
        return open(tar)
      },
    }
  },
}
