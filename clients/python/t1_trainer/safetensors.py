"""Safetensors files (8-byte little-endian header length, a JSON header of tensor dtypes, shapes
and byte offsets plus string metadata, then the tensors' bytes), read and written without the
`safetensors` package. Reads F32, F16, BF16 and F64 tensors (as float32, or float64 when asked);
writes F32 or BF16.

t1's one-file weights (what FetchWeights serves and PublishWeights takes) are such a file with
t1's metadata: `format` "t1-tinymoe", `config` (the model's config.json as JSON) and `version`.
"""

import json
import struct

import torch

FORMAT = "t1-tinymoe"
_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}
_WRITE = {torch.float32: "F32", torch.bfloat16: "BF16"}


class SafetensorsError(ValueError):
    """Bytes that are not a readable safetensors file; the message names the file and tensor."""


def read(data, name="safetensors", dtype=torch.float32):
    """(tensors by name as `dtype` torch tensors, metadata dict) of a safetensors file's bytes.
    `name`: the file, for error messages."""
    if len(data) < 8:
        raise SafetensorsError(f"{name}: {len(data)} bytes, shorter than the 8-byte header length")
    (length,) = struct.unpack_from("<Q", data, 0)
    if 8 + length > len(data):
        raise SafetensorsError(f"{name}: header of {length} bytes runs past the end of the file ({len(data)} bytes)")
    try:
        header = json.loads(bytes(data[8 : 8 + length]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{name}: header is not JSON: {e}") from e
    if not isinstance(header, dict):
        raise SafetensorsError(f"{name}: header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    start = 8 + length
    tensors = {}
    for tensor, entry in header.items():
        stored = _DTYPES.get(entry.get("dtype"))
        if stored is None:
            raise SafetensorsError(f"{name}: {tensor}: dtype {entry.get('dtype')} is not F32, F16, BF16 or F64")
        shape = entry.get("shape")
        begin, end = entry.get("data_offsets", (None, None))
        count = 1
        for n in shape:
            count *= n
        width = torch.empty(0, dtype=stored).element_size()
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end and start + end <= len(data)):
            raise SafetensorsError(f"{name}: {tensor}: data_offsets {entry.get('data_offsets')} lie outside the file")
        if end - begin != count * width:
            raise SafetensorsError(f"{name}: {tensor}: {end - begin} bytes for shape {shape} of {entry['dtype']} ({count * width} expected)")
        raw = bytearray(data[start + begin : start + end])
        t = torch.frombuffer(raw, dtype=stored) if raw else torch.empty(0, dtype=stored)
        tensors[tensor] = t.reshape(shape).to(dtype)
    return tensors, metadata


def read_file(path, dtype=torch.float32):
    with open(path, "rb") as f:
        return read(f.read(), name=str(path), dtype=dtype)


def write(tensors, metadata, dtype=torch.float32):
    """Safetensors bytes of `tensors` (name → tensor, stored as `dtype`: float32 or bfloat16) with
    string `metadata`, tensors in name order."""
    code = _WRITE.get(dtype)
    if code is None:
        raise ValueError(f"writes float32 or bfloat16, not {dtype}")
    names = sorted(tensors)
    parts = []
    if metadata:
        parts.append('"__metadata__":' + json.dumps({k: str(metadata[k]) for k in sorted(metadata)}, separators=(",", ":")))
    blobs = []
    offset = 0
    for name in names:
        t = tensors[name].detach().to(dtype).contiguous().cpu()
        # Through int16/int32 views: numpy has no bfloat16, and the bytes are what matters.
        view = t.view(torch.int16) if dtype == torch.bfloat16 else t.view(torch.int32)
        blob = view.numpy().astype("<i2" if dtype == torch.bfloat16 else "<i4").tobytes()
        parts.append(
            json.dumps(name)
            + f':{{"dtype":"{code}","shape":'
            + json.dumps(list(t.shape))
            + ',"data_offsets":['
            + f"{offset},{offset + len(blob)}]}}"
        )
        blobs.append(blob)
        offset += len(blob)
    head = ("{" + ",".join(parts) + "}").encode("utf-8")
    padded = head + b" " * (-len(head) % 8)
    return struct.pack("<Q", len(padded)) + padded + b"".join(blobs)
