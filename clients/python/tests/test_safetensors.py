import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from t1_trainer import safetensors  # noqa: E402
from t1_trainer.tinymoe import TinyMoE  # noqa: E402

CONFIG = {
    "vocabSize": 32,
    "dModel": 8,
    "nLayers": 2,
    "nHeads": 2,
    "nExperts": 4,
    "topK": 2,
    "dFf": 16,
    "maxSeqLen": 64,
    "ropeTheta": 10000,
    "normEps": 1e-5,
}


def random_model(seed=0):
    g = torch.Generator().manual_seed(seed)
    from t1_trainer.tinymoe import _shapes

    tensors = {name: torch.randn(*shape, generator=g) * 0.1 for name, shape in _shapes(CONFIG).items()}
    return TinyMoE(CONFIG, tensors)


def test_round_trip_keeps_every_tensor_and_the_version():
    model = random_model()
    again, version = TinyMoE.from_bytes(model.to_bytes(7))
    assert version == 7
    for name, p in model.params.items():
        assert torch.equal(p, again.params[name])


def test_header_is_8_byte_aligned_and_metadata_is_strings():
    data = safetensors.write({"a": torch.ones(3)}, {"n": 1})
    length = int.from_bytes(data[:8], "little")
    assert length % 8 == 0
    tensors, metadata = safetensors.read(data)
    assert metadata == {"n": "1"} and torch.equal(tensors["a"], torch.ones(3))


def test_refuses_unknown_and_misshapen_tensors():
    model = random_model()
    tensors = {name.replace("__", "."): p.detach() for name, p in model.params.items()}
    try:
        TinyMoE(CONFIG, {**tensors, "layers.9.mystery": torch.ones(2)})
        raise AssertionError("accepted an unknown tensor")
    except ValueError as e:
        assert "mystery" in str(e)
    try:
        TinyMoE(CONFIG, {**tensors, "embed": torch.ones(31, 8)})
        raise AssertionError("accepted a misshapen tensor")
    except ValueError as e:
        assert "embed" in str(e)


def test_replay_uses_the_given_experts_and_changes_the_output():
    model = random_model(1)
    ids = torch.arange(10) % CONFIG["vocabSize"]
    with torch.no_grad():
        logits, _, routing, _ = model(ids)
        other = (routing + 1) % CONFIG["nExperts"]
        replayed, _, used, _ = model(ids, replay=other)
        same, _, _, _ = model(ids, replay=routing)
    assert torch.equal(used, other)
    assert torch.allclose(same, logits, atol=1e-6)
    assert (replayed - logits).abs().max() > 1e-4
