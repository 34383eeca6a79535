/**
 * The Python that runs the PyTorch reference learner (clients/python): the first of $T1_PYTHON,
 * python3, /usr/bin/python3 that imports torch, grpc and protobuf, or undefined (its tests skip).
 * CI installs Debian's python3-torch, python3-grpcio and python3-protobuf, so there it must exist.
 */
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"

export const CLIENT_DIR = fileURLToPath(new URL("../../clients/python", import.meta.url))

export const torchPython = [process.env.T1_PYTHON, "python3", "/usr/bin/python3"].find(
  (p) =>
    p !== undefined && spawnSync(p, ["-c", "import torch, grpc, google.protobuf"]).status === 0,
)
if (torchPython === undefined && process.env.CI === "true")
  throw new Error("CI needs python3-torch, python3-grpcio and python3-protobuf")
