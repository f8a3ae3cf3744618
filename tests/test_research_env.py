"""Candidate rules of the built-in AI come only through ``marl.envs.smac.research.variant_env``."""

from __future__ import annotations

import numpy as np
import pytest

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
