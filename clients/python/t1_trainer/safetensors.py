"""t1's weights files: safetensors (8-byte little-endian header length, a JSON header of tensor
dtypes, shapes and byte offsets plus string metadata, then the tensors' bytes) with t1's TinyMoE
metadata: format "t1-tinymoe", the model config as JSON, and the policy version. Reads F32, F16,
BF16 and F64 tensors; writes F32, which the gateway's PublishWeights checks and announces.
"""

import json
import struct

import torch

FORMAT = "t1-tinymoe"
_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def read(data):
    """(tensors by name as float32 torch tensors, metadata dict) of a safetensors file's bytes."""
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(bytes(data[8 : 8 + length]).decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    start = 8 + length
    tensors = {}
    for name, entry in header.items():
        dtype = _DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ValueError(f"{name}: dtype {entry['dtype']} is not a float type")
        begin, end = entry["data_offsets"]
        raw = bytearray(data[start + begin : start + end])
        t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(entry["shape"]).to(torch.float32)
    return tensors, metadata


def write(tensors, metadata):
    """Safetensors bytes of float32 `tensors` (name → tensor) with string `metadata`."""
    names = sorted(tensors)
    parts = []
    if metadata:
        parts.append('"__metadata__":' + json.dumps({k: str(metadata[k]) for k in sorted(metadata)}, separators=(",", ":")))
    blobs = []
    offset = 0
    for name in names:
        t = tensors[name].detach().to(torch.float32).contiguous().cpu()
        blob = t.numpy().astype("<f4").tobytes()
        parts.append(
            json.dumps(name)
            + ':{"dtype":"F32","shape":'
            + json.dumps(list(t.shape))
            + ',"data_offsets":['
            + f"{offset},{offset + len(blob)}]}}"
        )
        blobs.append(blob)
        offset += len(blob)
    head = ("{" + ",".join(parts) + "}").encode("utf-8")
    padded = head + b" " * (-len(head) % 8)
    return struct.pack("<Q", len(padded)) + padded + b"".join(blobs)
