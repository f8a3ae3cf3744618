"""Candidate rules of the built-in AI come only through ``marl.envs.smac.research.variant_env``."""

from __future__ import annotations

import numpy as np
import pytest
from shared import last_action_rewards  # tests/ is on sys.path under pytest

from marl.envs.smac import BatchedStarCraft2Env
from marl.envs.smac.research import variant_env
from marl.provenance import engine_label


def test_the_env_signature_has_no_research_rules() -> None:
    with pytest.raises(ValueError, match="sim_rules"):  # an unknown SMAC option, named
        BatchedStarCraft2Env("3m", 1, 0, sim_rules="noretaliate")


def test_default_rules_give_the_plain_fused_env() -> None:
    env = variant_env("3m", 2, 0, "default")
    assert type(env) is BatchedStarCraft2Env and env.fused
    assert "candidate_rules" not in env.engine_info()


def test_candidate_rules_step_stage_by_stage_and_are_named_in_the_engine_record() -> None:
    env = variant_env("2s_vs_1sc", 2, 0, "noretaliate+delay32")
    assert isinstance(env, BatchedStarCraft2Env) and not env.fused
    info = env.engine_info()
    assert info["candidate_rules"] == "noretaliate+delay32"
    assert engine_label(info).endswith(", candidate rules noretaliate+delay32")
    env.reset()
    avail = env.get_avail_actions()
    actions = np.argmax(avail, axis=-1)  # the first available action of every agent
    reward, terminated, _ = env.step(actions)
    assert reward.shape == (2,) and terminated.shape == (2,)


def test_an_unknown_rule_is_refused_before_the_engine_is_built() -> None:
    with pytest.raises(ValueError, match="unknown targeting rule 'nosuchrule'"):
        variant_env("3m", 1, 0, "nosuchrule")


def test_the_sc2_env_given_candidate_rules_trains_under_them_and_says_so() -> None:
    from marl import registry
    from marl.envs.smac.env import StarCraft2Env
    from marl.envs.smac.research import ResearchStarCraft2Env

    plain = registry.build("env", "sc2", map_name="3m", backend="sim", seed=3, candidate_rules="")
    assert type(plain) is StarCraft2Env and "candidate_rules" not in plain.engine_info()
    env = registry.build("env", "sc2", map_name="3m", backend="sim", seed=3, candidate_rules="noretaliate")
    assert isinstance(env, ResearchStarCraft2Env)
    assert env.engine_info()["candidate_rules"] == "noretaliate"
    same = registry.build("env", "sc2", map_name="3m", backend="sim", seed=3, candidate_rules="default")
    # no rule: the engine's own episodes
    assert last_action_rewards(same, 60) == last_action_rewards(plain, 60)
    rules = [last_action_rewards(env, 60) for _ in range(4)]
    base = [last_action_rewards(plain, 60) for _ in range(4)]
    assert rules != base  # without retaliation the enemies keep focusing: other episodes


def test_the_batched_path_rows_equal_the_research_env() -> None:
    from marl import registry

    vec = registry.build("batched_env", "sc2", map_name="3m", backend="sim", n_envs=2, seed=5,
                         candidate_rules="noretaliate")  # fmt: skip
    assert vec.env.engine_info()["candidate_rules"] == "noretaliate"
    one = registry.build("env", "sc2", map_name="3m", backend="sim", seed=6, candidate_rules="noretaliate")
    seen = vec.reset([1])[0]
    one.reset()
    for _ in range(40):  # the row and the env take the same actions and see the same things
        assert np.array_equal(seen.obs_NO, np.asarray(one.get_obs())) and np.array_equal(
            seen.state_S, one.get_state()
        )
        acts = np.array([[int(np.flatnonzero(a)[-1]) for a in seen.avail_NA]])
        tr = vec.step(acts, [1])[0]
        reward, terminated, _ = one.step(acts[0])
        assert tr.reward == pytest.approx(reward) and bool(tr.terminated) == terminated
        if terminated:
            break
        seen = tr.next


@pytest.mark.parametrize(
    "map_name, backend, rules, says",
    [
        ("3m", "sc2", "noretaliate", "embedded engine only"),
        ("protoss_5_vs_5", "sim", "noretaliate", "not the SMACv2 scenario"),
        ("3m", "sim", "nosuchrule", "unknown targeting rule"),
    ],
)
def test_candidate_rules_refuse_what_they_cannot_do(
    map_name: str, backend: str, rules: str, says: str
) -> None:
    from marl import registry

    with pytest.raises(ValueError, match=says):
        registry.build("env", "sc2", map_name=map_name, backend=backend, seed=0, candidate_rules=rules)
