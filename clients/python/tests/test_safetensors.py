"""t1's one-file weights (t1_trainer/tinymoe.py, safetensors.py): round trip, metadata, refusals."""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from t1_trainer import safetensors  # noqa: E402
from t1_trainer.qwen3_moe import CheckpointError  # noqa: E402
from t1_trainer.tinymoe import TinyMoE  # noqa: E402
from test_qwen3_moe import config_of, random_tensors  # noqa: E402


def random_model(seed=0, **over):
    config = config_of(**over)
    model = TinyMoE(config)
    model.load_tensors(random_tensors(config, seed))
    return model


def test_round_trip_keeps_every_tensor_the_config_and_the_version():
    model = random_model()
    data = model.to_bytes(7, {"job": "j-1"})
    _, metadata = safetensors.read(data)
    assert metadata["format"] == "pt" and metadata["t1"] == "t1-tinymoe" and metadata["job"] == "j-1"
    assert json.loads(metadata["config"])["model_type"] == "qwen3_moe"
    again, version = TinyMoE.from_bytes(data)
    assert version == 7
    for name, t in model.state_dict().items():
        assert torch.equal(t, again.state_dict()[name]), name


def test_a_file_without_the_critic_starts_it_at_zero():
    model = random_model()
    tensors, metadata = safetensors.read(model.to_bytes(1))
    del tensors["value_head.weight"], tensors["value_head.bias"]
    again, _ = TinyMoE.from_bytes(safetensors.write(tensors, metadata))
    assert float(again.value_head.weight.abs().max()) == 0 and float(again.value_head.bias.abs().max()) == 0


def test_header_is_8_byte_aligned_metadata_is_strings_and_bf16_reads_back():
    data = safetensors.write({"a": torch.ones(3)}, {"n": 1})
    assert int.from_bytes(data[:8], "little") % 8 == 0
    tensors, metadata = safetensors.read(data)
    assert metadata == {"n": "1"} and torch.equal(tensors["a"], torch.ones(3))
    x = torch.tensor([1.0, -2.5, 3.1415926])
    back, _ = safetensors.read(safetensors.write({"x": x}, {}, torch.bfloat16))
    assert torch.equal(back["x"], x.to(torch.bfloat16).float())


def test_refuses_files_that_are_not_t1_weights_and_truncated_tensors():
    model = random_model()
    tensors, metadata = safetensors.read(model.to_bytes(1))
    for drop in ("t1", "config"):
        try:
            TinyMoE.from_bytes(safetensors.write(tensors, {k: v for k, v in metadata.items() if k != drop}))
        except CheckpointError as e:
            assert drop in str(e)
        else:
            raise AssertionError(f"accepted a file without {drop}")
    data = model.to_bytes(1)
    try:
        safetensors.read(data[:-4], name="short.safetensors")
    except safetensors.SafetensorsError as e:
        assert "short.safetensors" in str(e)
    else:
        raise AssertionError("read a truncated file")


def test_refuses_unknown_and_misshapen_tensors():
    model = random_model()
    tensors, metadata = safetensors.read(model.to_bytes(1))
    for name, bad in (("layers.9.mystery", torch.ones(2)), ("model.embed_tokens.weight", torch.ones(31, 12))):
        try:
            TinyMoE.from_bytes(safetensors.write({**tensors, name: bad}, metadata))
        except CheckpointError as e:
            assert name in str(e)
        else:
            raise AssertionError(f"accepted {name}")
