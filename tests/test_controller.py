"""Multi-agent controller: inputs, masked epsilon-greedy, annealing, rows, NumPy actor == MindSpore agent."""

from __future__ import annotations

import numpy as np
import pytest

from marl.config.schema import AgentConfig, ExplorationConfig
from marl.controllers import MultiAgentController, build_agent_inputs, input_dim
from marl.envs.base import EnvInfo
from marl.utils.ms import ms, params_to_numpy, setup

setup(1, seed=0)

INFO = EnvInfo(n_agents=3, n_actions=5, obs_shape=4, state_shape=6, episode_limit=8)
EXPL = ExplorationConfig(epsilon_start=1.0, epsilon_finish=0.05, epsilon_anneal_time=1000)


def _mac(name: str = "rnn", seed: int = 0, **agent_kw: object) -> MultiAgentController:
    return MultiAgentController(INFO, AgentConfig(name=name, hidden_dim=8, **agent_kw), EXPL, seed=seed)


def test_build_agent_inputs_layout() -> None:
    b, t, n, o, a = 2, 3, 3, 4, 5
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(b, t, n, o)).astype(np.float32)
    act = np.eye(a, dtype=np.float32)[rng.integers(0, a, size=(b, t, n))]
    x = build_agent_inputs(obs, act, True, True)
    assert x.shape == (b, t, n, o + a + n)
    np.testing.assert_array_equal(x[..., :o], obs)
    np.testing.assert_array_equal(x[:, 0, :, o : o + a], 0.0)  # no previous action at t = 0
    np.testing.assert_array_equal(x[:, 1:, :, o : o + a], act[:, :-1])  # previous step's action
    np.testing.assert_array_equal(x[0, 2, :, o + a :], np.eye(n))  # agent id one-hot
    prev = act[:, 0]
    x_prev = build_agent_inputs(obs, act, True, False, prev_action_BNA=prev)
    np.testing.assert_array_equal(x_prev[:, 0, :, o:], prev)
    assert build_agent_inputs(obs, None, False, False).shape == (b, t, n, o)
    with pytest.raises(ValueError, match="actions_onehot"):
        build_agent_inputs(obs, None, True, False)
    assert input_dim(INFO, AgentConfig()) == 4 + 5 + 3
    assert input_dim(INFO, AgentConfig(obs_last_action=False, obs_agent_id=False)) == 4


def test_epsilon_anneals_linearly() -> None:
    mac = _mac()
    assert mac.epsilon(0) == pytest.approx(1.0)
    assert mac.epsilon(250) == pytest.approx(1.0 - 0.25 * 0.95)
    assert mac.epsilon(500) == pytest.approx(0.525)
    assert mac.epsilon(1000) == pytest.approx(0.05)
    assert mac.epsilon(10**7) == pytest.approx(0.05)


def test_never_picks_unavailable_and_explores_uniformly() -> None:
    mac = _mac(seed=3)
    envs = 4
    rng = np.random.default_rng(1)
    avail = (rng.random((envs, INFO.n_agents, INFO.n_actions)) < 0.5).astype(np.int32)
    avail[..., 2] = 1
    counts = np.zeros_like(avail)
    mac.init_hidden(envs)
    for i in range(600):
        obs = rng.normal(size=(envs, INFO.n_agents, INFO.obs_shape)).astype(np.float32)
        acts = mac.select_actions(obs, avail, t_env=0 if i < 400 else 500, test_mode=False)
        assert acts.dtype == np.int64 and acts.shape == (envs, INFO.n_agents)
        picked = np.take_along_axis(avail, acts[..., None], axis=2)
        assert (picked == 1).all()
        if i < 400:  # count only the epsilon = 1 draws (later ones depend on the random network weights)
            np.put_along_axis(counts, acts[..., None], np.take_along_axis(counts, acts[..., None], 2) + 1, 2)
    # with epsilon = 1 every available action is drawn about equally often (0.15 is ~7 standard deviations)
    assert (counts[avail == 1] > 0).all()
    assert (counts[avail == 0] == 0).all()
    frac = counts / counts.sum(axis=2, keepdims=True)
    expected = avail / avail.sum(axis=2, keepdims=True)
    assert np.abs(frac - expected)[avail == 1].max() < 0.15


def test_test_mode_is_greedy_over_available() -> None:
    mac = _mac(seed=4)
    rng = np.random.default_rng(2)
    obs = rng.normal(size=(2, INFO.n_agents, INFO.obs_shape)).astype(np.float32)
    avail = np.ones((2, INFO.n_agents, INFO.n_actions), np.int32)
    avail[:, :, 1] = 0
    mac.init_hidden(2)
    q = mac.forward(obs)  # same first step a fresh controller would take
    mac.init_hidden(2)
    acts = mac.select_actions(obs, avail, t_env=0, test_mode=True)
    np.testing.assert_array_equal(acts, np.where(avail > 0, q, -np.inf).argmax(2))
    with pytest.raises(ValueError, match="at least one available"):
        mac.select_actions(obs, np.zeros_like(avail), t_env=0, test_mode=True)


@pytest.mark.parametrize("name", ["rnn", "mlp"])
def test_numpy_actor_matches_mindspore_agent(name: str) -> None:
    mac = _mac(name, seed=5)
    rng = np.random.default_rng(3)
    m = 6
    h_np = np.zeros((m, 8), np.float32)
    h_ms = h_np.copy()
    for _ in range(4):
        x = rng.normal(size=(m, mac.input_dim)).astype(np.float32)
        q_np, h_np = mac.actor.step(x, h_np)
        q_ms, h_ms = mac.forward_ms(x, h_ms)
        np.testing.assert_allclose(q_np, q_ms, atol=1e-5)
        np.testing.assert_allclose(h_np, h_ms, atol=1e-5)


def test_acting_matches_learner_unroll_and_loaded_weights() -> None:
    """Step-by-step acting == the agent's unroll over build_agent_inputs of the same episode."""
    mac = _mac(seed=6)
    other = _mac(seed=7)
    mac.load_weights(params_to_numpy(other.agent))
    rng = np.random.default_rng(4)
    t = 5
    obs = rng.normal(size=(1, t, INFO.n_agents, INFO.obs_shape)).astype(np.float32)
    avail = np.ones((1, INFO.n_agents, INFO.n_actions), np.int32)
    mac.init_hidden(1)
    qs, acts = [], []
    for step in range(t):
        acts.append(mac.select_actions(obs[:, step], avail, t_env=0, test_mode=True))
    mac.init_hidden(1)
    for step in range(t):  # replay with the same actions to collect Q-values
        qs.append(mac.forward(obs[:, step]))
        mac.last_action_BNA[:] = np.eye(INFO.n_actions, dtype=np.float32)[acts[step]]
    onehot = np.eye(INFO.n_actions, dtype=np.float32)[np.stack(acts, 1)]
    inputs = build_agent_inputs(obs, onehot, True, True)
    q_unroll = other.agent.unroll(ms.Tensor(inputs)).asnumpy()
    np.testing.assert_allclose(np.stack(qs, 1), q_unroll, atol=1e-5)
    # forward_ms follows the loaded weights as well
    x = rng.normal(size=(2, mac.input_dim)).astype(np.float32)
    np.testing.assert_allclose(
        mac.forward_ms(x, np.zeros((2, 8), np.float32))[0],
        other.forward_ms(x, np.zeros((2, 8), np.float32))[0],
        atol=1e-6,
    )


def test_rows_keep_other_envs_untouched() -> None:
    mac = _mac(seed=8)
    rng = np.random.default_rng(5)
    mac.init_hidden(4)
    obs = rng.normal(size=(4, INFO.n_agents, INFO.obs_shape)).astype(np.float32)
    avail = np.ones((4, INFO.n_agents, INFO.n_actions), np.int32)
    mac.select_actions(obs, avail, t_env=0, test_mode=True)
    h_before, last_before = mac.hidden_BNH.copy(), mac.last_action_BNA.copy()
    rows = np.array([1, 3])
    acts = mac.select_actions(obs[rows], avail[rows], t_env=0, test_mode=True, rows=rows)
    assert acts.shape == (2, INFO.n_agents)
    np.testing.assert_array_equal(mac.hidden_BNH[[0, 2]], h_before[[0, 2]])
    np.testing.assert_array_equal(mac.last_action_BNA[[0, 2]], last_before[[0, 2]])
    assert not np.allclose(mac.hidden_BNH[rows], h_before[rows])
    np.testing.assert_array_equal(mac.last_action_BNA[rows].argmax(2), acts)
    # full-batch arrays are accepted too and give the same actions for the same state
    mac2 = _mac(seed=9)
    mac2.load_weights(params_to_numpy(mac.agent))
    mac2.init_hidden(4)
    mac2.select_actions(obs, avail, t_env=0, test_mode=True)
    np.testing.assert_array_equal(mac2.select_actions(obs, avail, 0, True, rows=rows), acts)
    with pytest.raises(IndexError):
        mac.select_actions(obs[:1], avail[:1], 0, True, rows=np.array([7]))


def test_controller_with_weights_does_not_import_mindspore() -> None:
    """Rollout workers that receive weights act without loading MindSpore."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from marl.config.schema import AgentConfig, ExplorationConfig\n"
        "from marl.controllers import MultiAgentController\n"
        "from marl.envs.base import EnvInfo\n"
        "info = EnvInfo(n_agents=2, n_actions=3, obs_shape=4, state_shape=5, episode_limit=6)\n"
        "w = {k: np.zeros(s) for k, s in [('fc1.weight', (8, 9)), ('fc1.bias', (8,)),\n"
        "     ('rnn.weight_ih', (24, 8)), ('rnn.weight_hh', (24, 8)), ('rnn.bias_ih', (24,)),\n"
        "     ('rnn.bias_hh', (24,)), ('fc2.weight', (3, 8)), ('fc2.bias', (3,))]}\n"
        "mac = MultiAgentController(info, AgentConfig(hidden_dim=8), ExplorationConfig(), 0, weights=w)\n"
        "mac.init_hidden(2)\n"
        "a = mac.select_actions(np.zeros((2, 2, 4)), np.ones((2, 2, 3)), 0)\n"
        "assert a.shape == (2, 2)\n"
        "print('mindspore' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
