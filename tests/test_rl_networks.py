"""Networks: shapes, masking (an invalid slot is never chosen), slot-wise scoring, pooling."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import torch

from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
from hpcpolicy.learn.networks import ActorCritic, PolicyScorer, ValueNet, slots_in_use

FJ, FC = len(JOB_FEATURES), len(CLUSTER_FEATURES)


def _batch(b: int, k: int,
           seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    jobs = torch.rand(b, k, FJ, generator=g)
    cluster = torch.rand(b, FC, generator=g)
    mask = torch.rand(b, k, generator=g) < 0.3
    mask[torch.arange(b), torch.randint(0, k, (b,), generator=g)] = True  # >= 1 valid per row
    return jobs, cluster, mask


def test_shapes_for_any_k() -> None:
    net = ActorCritic(FJ, FC)
    for k in (1, 8, 128):
        jobs, cluster, mask = _batch(3, k)
        action, logprob, entropy, value = net.get_action_and_value(jobs, cluster, mask)
        assert action.shape == logprob.shape == entropy.shape == value.shape == (3,)
        assert net.masked_logits(jobs, cluster, mask).shape == (3, k)


def test_invalid_slot_is_never_sampled() -> None:
    torch.manual_seed(0)
    net = ActorCritic(FJ, FC)
    # make invalid slots look attractive: large scores everywhere a job would be invalid
    jobs, cluster, mask = _batch(512, 16, seed=1)
    jobs[~mask] = 50.0
    g = torch.Generator().manual_seed(3)
    for _ in range(5):
        action, logprob, entropy, _ = net.get_action_and_value(jobs, cluster, mask, generator=g)
        assert mask[torch.arange(512), action].all()
        assert torch.isfinite(logprob).all() and torch.isfinite(entropy).all()


def test_invalid_slots_have_zero_probability_and_single_valid_slot_is_certain() -> None:
    net = ActorCritic(FJ, FC)
    jobs, cluster, _ = _batch(4, 6)
    mask = torch.zeros(4, 6, dtype=torch.bool)
    mask[:, 2] = True
    probs = torch.softmax(net.masked_logits(jobs, cluster, mask), dim=-1)
    assert torch.equal(probs[:, 2], torch.ones(4))
    assert torch.equal(probs[~mask], torch.zeros(int((~mask).sum())))
    _, logprob, entropy, _ = net.get_action_and_value(jobs, cluster, mask,
                                                      torch.full((4,), 2))
    assert torch.equal(logprob, torch.zeros(4)) and torch.equal(entropy, torch.zeros(4))


def test_each_slot_is_scored_alone() -> None:
    """Score of a slot depends on its job and the cluster only: permuting slots permutes it."""
    net = ActorCritic(FJ, FC)
    jobs, cluster, mask = _batch(2, 10)
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(5))
    scores = net.scorer(jobs, cluster)
    torch.testing.assert_close(net.scorer(jobs[:, perm], cluster), scores[:, perm])
    # the deployable scorer agrees with the training logits on valid slots, -inf elsewhere
    deploy = PolicyScorer(net.scorer)(jobs, cluster, mask)
    assert torch.equal(deploy[mask], scores[mask])
    assert torch.isneginf(deploy[~mask]).all()


def test_value_ignores_slot_order_and_invalid_slots() -> None:
    net = ActorCritic(FJ, FC)
    jobs, cluster, mask = _batch(2, 10)
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(6))
    value = net.get_value(jobs, cluster, mask)
    torch.testing.assert_close(net.get_value(jobs[:, perm], cluster, mask[:, perm]), value)
    garbage = jobs.clone()
    garbage[~mask] = 123.0
    torch.testing.assert_close(net.get_value(garbage, cluster, mask), value)


def test_training_on_the_valid_slots_alone_gives_the_gradients_of_all_slots() -> None:
    torch.manual_seed(0)
    net = ActorCritic(5, 3)
    jobs, cluster = torch.rand(6, 9, 5), torch.rand(6, 3)
    mask = torch.rand(6, 9) < 0.5
    mask[:, 0] = True
    actions = torch.tensor([0, 0, 0, 0, 0, 0])

    def gradients(loss: torch.Tensor) -> list[torch.Tensor]:
        net.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        return [p.grad.clone() for p in net.parameters() if p.grad is not None]

    _, logprob, entropy, value = net.get_action_and_value(jobs, cluster, mask, actions)
    packed = gradients(logprob.sum() + entropy.sum() + value.sum())
    # the same quantities over every slot, padded: the scorer's masked logits, and the value
    # of the mean embedding over the valid slots
    logp = torch.log_softmax(net.masked_logits(jobs, cluster, mask), dim=-1)
    inputs = torch.cat([jobs, cluster[:, None].expand(-1, 9, -1)], dim=-1)
    m = mask[..., None].float()
    pooled = (net.critic.embed(inputs) * m).sum(dim=1) / m.sum(dim=1)
    padded_value = net.critic.head(torch.cat([pooled, cluster], dim=-1)).squeeze(-1)
    padded = gradients(logp.gather(-1, actions[:, None]).sum()
                       - (logp.exp() * logp).sum() + padded_value.sum())
    for a, b in zip(packed, padded, strict=True):
        torch.testing.assert_close(a, b)


def test_the_value_averages_the_valid_slots_embeddings() -> None:
    torch.manual_seed(0)
    net = ValueNet(4, 2)
    jobs, cluster = torch.rand(3, 5, 4), torch.rand(3, 2)
    mask = torch.tensor([[True, True, False, False, False], [False] * 5,
                         [False, True, False, True, True]])
    expected = []
    for b in range(3):
        inputs = torch.cat([jobs[b, mask[b]], cluster[b].expand(int(mask[b].sum()), 2)], dim=-1)
        pooled = net.embed(inputs).mean(dim=0) if mask[b].any() else torch.zeros(32)
        expected.append(net.head(torch.cat([pooled, cluster[b]])).squeeze(-1))
    torch.testing.assert_close(net(jobs, cluster, mask), torch.stack(expected))  # empty row: 0s


def test_parameter_count_does_not_depend_on_k_or_cluster() -> None:
    net = ActorCritic(FJ, FC, hidden=(32, 16, 8))
    n_scorer = sum(p.numel() for p in net.scorer.parameters())
    assert n_scorer == (FJ + FC) * 32 + 32 + 32 * 16 + 16 + 16 * 8 + 8 + 8 + 1


def test_slots_after_the_last_valid_one_change_nothing():
    torch.manual_seed(0)
    net = ActorCritic(5, 3)
    jobs, cluster = torch.rand(4, 16, 5), torch.rand(4, 3)
    mask = torch.zeros(4, 16, dtype=torch.bool)
    mask[0, :3] = mask[1, [0, 6]] = mask[2, 0] = mask[3, 2:5] = True
    actions = torch.tensor([2, 6, 0, 4])
    k = slots_in_use(mask)
    assert k == 7
    full = net.get_action_and_value(jobs, cluster, mask, actions)
    cut = net.get_action_and_value(jobs[:, :k], cluster, mask[:, :k], actions)
    for a, b in zip(full, cut, strict=True):
        torch.testing.assert_close(a, b)
    assert slots_in_use(torch.zeros(2, 16, dtype=torch.bool)) == 1
