"""Checkpoint directories (t1_trainer/hf_checkpoint.py): written from Python, read back by name
(index + shards, or one model.safetensors; the critic on its own), and every way a directory can
fail to fit its config refused with the file and tensor named."""

import json
import math
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from t1_trainer import hf_checkpoint, safetensors  # noqa: E402
from t1_trainer.qwen3_moe import CheckpointError, ConfigError  # noqa: E402
from test_qwen3_moe import config_of, model_of  # noqa: E402


def saved(model=None, **options):
    folder = tempfile.mkdtemp(prefix="t1-hf-")
    hf_checkpoint.save(model or model_of(config_of(), dtype=torch.float32), folder, **options)
    return folder


def refused(folder, *words, **options):
    try:
        hf_checkpoint.load(folder, **options)
    except (CheckpointError, ConfigError) as e:
        for w in words:
            assert w in str(e), f"{w!r} not in {e}"
        return str(e)
    raise AssertionError("loaded")


def rewrite(path, change):
    tensors, metadata = safetensors.read_file(path)
    change(tensors)
    with open(path, "wb") as f:
        f.write(safetensors.write(tensors, metadata))


def test_sharded_round_trip_keeps_every_tensor_and_the_outputs():
    model = model_of(config_of(), dtype=torch.float32)
    folder = saved(model, max_shard_bytes=2000)
    shards = sorted(f for f in os.listdir(folder) if f.startswith("model-"))
    assert len(shards) > 2 and shards[0] == f"model-00001-of-{len(shards):05d}.safetensors"
    index = json.load(open(os.path.join(folder, hf_checkpoint.INDEX)))
    assert set(index["weight_map"]) == set(model.state_dict()) - {"value_head.weight", "value_head.bias"}
    again = hf_checkpoint.load(folder)
    assert again.has_critic
    for name, t in model.state_dict().items():
        assert torch.equal(t, again.state_dict()[name]), name
    ids = torch.tensor([1, 5, 9, 13])
    with torch.no_grad():
        assert torch.equal(model(ids)[0], again(ids)[0])


def test_one_model_safetensors_without_index_and_without_critic():
    model = model_of(config_of(), dtype=torch.float32)
    folder = saved(model)
    tensors = {}
    for f in os.listdir(folder):
        if f.startswith("model-"):
            tensors.update(safetensors.read_file(os.path.join(folder, f))[0])
            os.remove(os.path.join(folder, f))
    os.remove(os.path.join(folder, hf_checkpoint.INDEX))
    os.remove(os.path.join(folder, hf_checkpoint.CRITIC_FILE))
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(safetensors.write(tensors, {}))
    again = hf_checkpoint.load(folder)
    assert not again.has_critic
    ids = torch.tensor([2, 4, 6])
    with torch.no_grad():
        logits, values, _, _ = again(ids)
        assert values is None and torch.equal(logits, model(ids)[0])
    refused(folder, "critic/value_head.safetensors", "missing", critic=True)


def test_bfloat16_shards_load_as_rounded_float32():
    model = model_of(config_of(), dtype=torch.float32)
    folder = saved(model, dtype=torch.bfloat16)
    again = hf_checkpoint.load(folder)
    w = model.state_dict()["model.layers.0.mlp.gate.weight"]
    assert torch.equal(again.state_dict()["model.layers.0.mlp.gate.weight"], w.to(torch.bfloat16).float())


def test_tied_embeddings_publish_one_copy_and_load_it_for_both():
    model = model_of(config_of(tie_word_embeddings=True), dtype=torch.float32)
    folder = saved(model)
    index = json.load(open(os.path.join(folder, hf_checkpoint.INDEX)))
    assert "lm_head.weight" not in index["weight_map"]
    again = hf_checkpoint.load(folder)
    assert torch.equal(again.lm_head.weight, again.model.embed_tokens.weight)


def test_a_directory_without_index_or_model_file_is_refused():
    folder = saved()
    for f in os.listdir(folder):
        if f.startswith("model"):
            os.remove(os.path.join(folder, f))
    refused(folder, folder, "neither model.safetensors.index.json nor model.safetensors")


def test_wrong_names_shapes_and_values_are_refused_naming_file_and_tensor():
    def first_shard_with(folder, name):
        index = json.load(open(os.path.join(folder, hf_checkpoint.INDEX)))
        return os.path.join(folder, index["weight_map"][name])

    name = "model.layers.1.self_attn.k_proj.weight"
    # A tensor of the wrong shape.
    folder = saved()
    shard = first_shard_with(folder, name)
    rewrite(shard, lambda t: t.__setitem__(name, torch.zeros(3, 12)))
    refused(folder, shard, name, "shape [3, 12], expected [8, 12]")
    # Non-finite values.
    for bad in (math.nan, math.inf):
        folder = saved()
        shard = first_shard_with(folder, name)
        rewrite(shard, lambda t: t[name].__setitem__((0, 0), bad))
        refused(folder, shard, name, "non-finite")
    # A name the config's model does not have (a TinyMoE-era name), listed in the index.
    folder = saved()
    shard = first_shard_with(folder, name)
    rewrite(shard, lambda t: t.__setitem__("layers.0.wq", torch.zeros(2)))
    index_path = os.path.join(folder, hf_checkpoint.INDEX)
    index = json.load(open(index_path))
    index["weight_map"]["layers.0.wq"] = os.path.basename(shard)
    json.dump(index, open(index_path, "w"))
    refused(folder, shard, "layers.0.wq", "not a tensor of Qwen3MoeForCausalLM")
    # A tensor missing from the checkpoint.
    folder = saved()
    shard = first_shard_with(folder, name)
    rewrite(shard, lambda t: t.pop(name))
    index = json.load(open(os.path.join(folder, hf_checkpoint.INDEX)))
    del index["weight_map"][name]
    json.dump(index, open(os.path.join(folder, hf_checkpoint.INDEX), "w"))
    refused(folder, name, "missing")
    # The index and the shard disagree.
    folder = saved()
    shard = first_shard_with(folder, name)
    rewrite(shard, lambda t: t.pop(name))
    refused(folder, shard, name, "listed in model.safetensors.index.json but not in the shard")
    # A shard that is not there.
    folder = saved()
    shard = first_shard_with(folder, name)
    os.remove(shard)
    refused(folder, shard, "missing")
    # The critic inside the engine's shards.
    folder = saved()
    shard = first_shard_with(folder, name)
    rewrite(shard, lambda t: t.__setitem__("value_head.bias", torch.zeros(1)))
    index = json.load(open(os.path.join(folder, hf_checkpoint.INDEX)))
    index["weight_map"]["value_head.bias"] = os.path.basename(shard)
    json.dump(index, open(os.path.join(folder, hf_checkpoint.INDEX), "w"))
    refused(folder, "value_head.bias", "critic/value_head.safetensors")


def test_a_config_of_another_architecture_is_refused():
    folder = saved()
    path = os.path.join(folder, "config.json")
    config = json.load(open(path))
    json.dump({**config, "model_type": "mixtral", "architectures": ["MixtralForCausalLM"]}, open(path, "w"))
    refused(folder, "config.json model_type", "mixtral")


def test_t1_metadata_is_not_needed_and_not_read():
    folder = saved()
    for f in os.listdir(folder):
        if f.startswith("model-"):
            path = os.path.join(folder, f)
            tensors, _ = safetensors.read_file(path)
            with open(path, "wb") as out:
                out.write(safetensors.write(tensors, {}))
    path = os.path.join(folder, "config.json")
    json.dump({**json.load(open(path)), "t1_policy_version": "7", "format": "not-t1"}, open(path, "w"))
    assert hf_checkpoint.load(folder).has_critic
