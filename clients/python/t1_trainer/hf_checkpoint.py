"""Hugging Face checkpoint directories of a Qwen3-MoE, read and written by tensor name only:

    config.json                          the model (model_type "qwen3_moe")
    model.safetensors.index.json         {"metadata": {"total_size": N}, "weight_map": {name: shard}}
    model-0000i-of-0000n.safetensors     the shards
  or
    model.safetensors                    one file, no index
  and, for t1's critic (outside the index: an engine never sees it)
    critic/value_head.safetensors        value_head.weight [1, d], value_head.bias [1]

Nothing of t1's own metadata is read: safetensors `__metadata__` and config.json keys that
Qwen3MoeConfig does not define are ignored.
"""

import json
import os

import torch

from . import safetensors
from .qwen3_moe import CRITIC, CheckpointError, Qwen3Moe

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
CRITIC_FILE = os.path.join("critic", "value_head.safetensors")


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise CheckpointError(path, "(file)", "missing") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(path, "(file)", f"not JSON: {e}") from None


def _read_shard(path, dtype):
    try:
        return safetensors.read_file(path, dtype)
    except FileNotFoundError:
        raise CheckpointError(path, "(file)", "missing") from None
    except safetensors.SafetensorsError as e:
        raise CheckpointError(path, "(file)", str(e)) from None


def read_tensors(folder, dtype=torch.float32):
    """(name → tensor, name → file it came from) of a checkpoint directory's model weights."""
    index_path = os.path.join(folder, INDEX)
    if os.path.exists(index_path):
        index = _read_json(index_path)
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(index_path, "weight_map", "expected an object of tensor name → shard file")
        tensors, origin = {}, {}
        for shard in sorted(set(weight_map.values())):
            if not isinstance(shard, str) or os.path.basename(shard) != shard or shard in ("", ".", ".."):
                raise CheckpointError(index_path, "weight_map", f"shard {shard!r} is not a file name in the directory")
            path = os.path.join(folder, shard)
            found, _ = _read_shard(path, dtype)
            listed = {name for name, file in weight_map.items() if file == shard}
            for name in sorted(listed - set(found)):
                raise CheckpointError(path, name, f"listed in {INDEX} but not in the shard")
            for name in sorted(set(found) - listed):
                raise CheckpointError(path, name, f"in the shard but {INDEX} maps it elsewhere or not at all")
            for name in listed:
                tensors[name], origin[name] = found[name], path
        return tensors, origin
    single = os.path.join(folder, SINGLE)
    if os.path.exists(single):
        tensors, _ = _read_shard(single, dtype)
        return tensors, {name: single for name in tensors}
    raise CheckpointError(folder, "(directory)", f"neither {INDEX} nor {SINGLE}")


def load(folder, critic="auto", dtype=torch.float32):
    """The Qwen3-MoE of a checkpoint directory. `critic`: "auto" loads critic/value_head.safetensors
    when present, True requires it, False leaves the model without one."""
    config = _read_json(os.path.join(folder, "config.json"))
    critic_path = os.path.join(folder, CRITIC_FILE)
    with_critic = critic is True or (critic == "auto" and os.path.exists(critic_path))
    model = Qwen3Moe(config, critic=with_critic, dtype=dtype)
    tensors, origin = read_tensors(folder, dtype)
    if with_critic:
        found, _ = _read_shard(critic_path, dtype)
        for name in sorted(set(found) - set(CRITIC)):
            raise CheckpointError(critic_path, name, "not a critic tensor (value_head.weight, value_head.bias)")
        for name in CRITIC:
            if name not in found:
                raise CheckpointError(critic_path, name, "missing")
            if name in tensors:
                raise CheckpointError(origin[name], name, "the critic belongs in critic/value_head.safetensors, not the model's shards")
            tensors[name], origin[name] = found[name], critic_path
    model.load_tensors(tensors, origin=lambda name: origin.get(name, folder))
    return model


def save(model, folder, max_shard_bytes=5_000_000_000, dtype=torch.float32, config=None):
    """Write `model` as a checkpoint directory: shards of at most `max_shard_bytes` of tensor data
    (a tensor is never split; tensors in name order), the index, config.json (the model's, with
    `config` merged over it) and the critic, if any, in critic/value_head.safetensors."""
    os.makedirs(folder, exist_ok=True)
    state = {n: t for n, t in model.state_dict().items() if n not in CRITIC}
    if model.config["tie_word_embeddings"]:
        state.pop("lm_head.weight", None)  # as tied checkpoints are published: one copy
    width = torch.empty(0, dtype=dtype).element_size()
    groups, current, size, total = [], [], 0, 0
    for name in sorted(state):
        n = state[name].numel() * width
        total += n
        if current and size + n > max_shard_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(name)
        size += n
    if current:
        groups.append(current)
    weight_map = {}
    for i, group in enumerate(groups):
        shard = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        with open(os.path.join(folder, shard), "wb") as f:
            f.write(safetensors.write({n: state[n] for n in group}, {"format": "pt"}, dtype))
        weight_map.update({n: shard for n in group})
    with open(os.path.join(folder, INDEX), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump({**model.raw_config, **(config or {})}, f, indent=2)
    if model.has_critic:
        os.makedirs(os.path.join(folder, "critic"), exist_ok=True)
        with open(os.path.join(folder, CRITIC_FILE), "wb") as f:
            f.write(safetensors.write({n: model.state_dict()[n] for n in CRITIC}, {"format": "pt"}, dtype))
