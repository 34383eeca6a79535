import os
import sys

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from t1_trainer.contract import TrainerStub, enum_value, message  # noqa: E402


def test_messages_round_trip_through_their_wire_form():
    header = message("t1.v1.PublishWeightsHeader")(
        job_id="job-1", lease_id="l", policy_version=3, step=3, format="safetensors", size_bytes=10
    )
    header.batch_ids.append("b-1")
    request = message("t1.v1.PublishWeightsRequest")(header=header)
    again = message("t1.v1.PublishWeightsRequest").FromString(request.SerializeToString())
    assert again.WhichOneof("part") == "header"
    assert again.header.batch_ids == ["b-1"] and again.header.policy_version == 3


def test_the_stub_has_every_trainer_method():
    stub = TrainerStub(grpc.insecure_channel("127.0.0.1:9"))
    for name in ("ClaimJob", "FetchWeights", "TakeBatch", "FetchTrajectory", "PublishWeights", "PublishWeightsRef", "ReportStep"):
        assert callable(getattr(stub, name))


def test_enums_resolve_by_name():
    assert enum_value("t1.v1.TrainPhase", "TRAIN_PHASE_PPO") == 3


def test_loss_weights_one_per_trajectory_or_refused():
    from t1_trainer.learner import loss_weights

    Batch, Trajectory = message("t1.v1.Batch"), message("t1.v1.Trajectory")
    two = [Trajectory(episode_id="a"), Trajectory(episode_id="b")]
    assert loss_weights(Batch(trajectories=two)) == [1.0, 1.0]
    assert loss_weights(Batch(trajectories=two, weights=[1.0, 0.5])) == [1.0, 0.5]
    for bad in ([1.0], [1.0, -0.5], [1.0, float("nan")]):
        try:
            loss_weights(Batch(batch_id="b-1", trajectories=two, weights=bad))
        except RuntimeError as e:
            assert "b-1" in str(e)
        else:
            raise AssertionError(f"weights {bad} were accepted")
