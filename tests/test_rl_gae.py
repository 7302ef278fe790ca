"""compute_gae against a reference written differently: explicit sums of discounted TD errors."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from hpcpolicy.ppo.ppo import compute_gae  # noqa: E402

Arr = npt.NDArray[np.float64]


def reference_gae(rewards: Arr, values: Arr, dones: Arr, next_value: Arr, gamma: float,
                  lam: float) -> tuple[Arr, Arr]:
    """A_t = sum_l (gamma*lam)^l delta_{t+l}, summed until the episode ends (per environment)."""
    t_max, n = rewards.shape
    adv = np.zeros((t_max, n))
    for env in range(n):
        for t in range(t_max):
            total, factor = 0.0, 1.0
            for u in range(t, t_max):
                following = next_value[env] if u == t_max - 1 else values[u + 1, env]
                following = 0.0 if dones[u, env] else following
                delta = rewards[u, env] + gamma * following - values[u, env]
                total += factor * delta
                if dones[u, env]:
                    break
                factor *= gamma * lam
            adv[t, env] = total
    return adv, adv + values


def _run(rewards: Arr, values: Arr, dones: Arr, next_value: Arr, gamma: float,
         lam: float) -> tuple[Arr, Arr]:
    adv, ret = compute_gae(torch.tensor(rewards), torch.tensor(values), torch.tensor(dones),
                           torch.tensor(next_value), gamma, lam)
    return adv.numpy(), ret.numpy()


def test_hand_computed_example() -> None:
    # one env, episode ends at t=1, a new one starts at t=2 and runs past the rollout
    rewards = np.array([[1.0], [2.0], [3.0]])
    values = np.array([[0.5], [1.0], [2.0]])
    dones = np.array([[0.0], [1.0], [0.0]])
    adv, ret = _run(rewards, values, dones, np.array([4.0]), 0.9, 0.8)
    d2 = 3.0 + 0.9 * 4.0 - 2.0
    d1 = 2.0 - 1.0
    d0 = 1.0 + 0.9 * 1.0 - 0.5
    np.testing.assert_allclose(adv[:, 0], [d0 + 0.72 * d1, d1, d2])
    np.testing.assert_allclose(ret, adv + values)


@settings(max_examples=60, deadline=None)
@given(t_max=st.integers(1, 12), n=st.integers(1, 4), seed=st.integers(0, 2**32 - 1),
       gamma=st.floats(0.0, 1.0), lam=st.floats(0.0, 1.0), done_p=st.floats(0.0, 0.6))
def test_matches_reference(t_max: int, n: int, seed: int, gamma: float, lam: float,
                           done_p: float) -> None:
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(t_max, n))
    values = rng.normal(size=(t_max, n))
    dones = (rng.random((t_max, n)) < done_p).astype(np.float64)
    next_value = rng.normal(size=n)
    adv, ret = _run(rewards, values, dones, next_value, gamma, lam)
    ref_adv, ref_ret = reference_gae(rewards, values, dones, next_value, gamma, lam)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ret, ref_ret, rtol=1e-9, atol=1e-9)


def test_inputs_are_not_modified() -> None:
    rewards, values = torch.ones(3, 2), torch.zeros(3, 2)
    dones, nv = torch.zeros(3, 2), torch.ones(2)
    before = [x.clone() for x in (rewards, values, dones, nv)]
    compute_gae(rewards, values, dones, nv, 0.99, 0.95)
    for a, b in zip(before, (rewards, values, dones, nv), strict=True):
        assert torch.equal(a, b)
