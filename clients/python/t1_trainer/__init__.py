"""t1's reference external learner: the Trainer API contract (contract.py), t1's weights files
(safetensors.py) and TinyMoE in PyTorch with rollout routing replay (tinymoe.py)."""
