"""A trainer outside t1 publishing a checkpoint directory: loads SRC (a Hugging Face checkpoint
directory, by tensor name) into the PyTorch Qwen3-MoE and writes it again to DST with this
package's writer (shards of at most MAX_SHARD_BYTES, DTYPE f32 or bf16, the critic beside them).

    python3 clients/python/tests/resave.py SRC DST MAX_SHARD_BYTES DTYPE
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from t1_trainer import hf_checkpoint  # noqa: E402


def main(src, dst, max_shard_bytes, dtype):
    model = hf_checkpoint.load(src, critic=True)
    hf_checkpoint.save(model, dst, max_shard_bytes=int(max_shard_bytes), dtype={"f32": torch.float32, "bf16": torch.bfloat16}[dtype])


if __name__ == "__main__":
    main(*sys.argv[1:5])
