"""benchmarks/interop/epymarl_qmix.py without EPyMARL: its command line, its run-time patch of gymma (driven
through a stand-in for EPyMARL's gymma module written here), and the parsing of Sacred's metrics and of
learn_smac's table."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.interop.epymarl_qmix import LAUNCHER, build_command, parse_learn_smac, parse_metrics

ROOT = Path(__file__).resolve().parents[1]

# A stand-in for EPyMARL's envs/gymma.py with the two behaviours the launcher replaces: the state is the
# concatenated observations and every action is marked available.
FAKE_GYMMA = """
import gymnasium as gym
import numpy as np
from gymnasium.wrappers import TimeLimit

class GymmaWrapper:
    def __init__(self, key, time_limit):
        self._env = TimeLimit(gym.make(key), max_episode_steps=time_limit)
        self.n_actions = self._env.action_space[0].n

    def reset(self):
        self._obs, _ = self._env.reset(seed=0)

    def get_state(self):
        return np.concatenate(self._obs)

    def get_avail_actions(self):
        return [[1] * self.n_actions for _ in self._obs]
"""

FAKE_MAIN = """
import json, sys
from envs.gymma import GymmaWrapper
env = GymmaWrapper(sys.argv[-1], 60)
env.reset()
u = env._env.unwrapped
print(json.dumps({
    "argv": sys.argv[1:],
    "state": [float(x) for x in env.get_state()],
    "env_state": [float(x) for x in u.get_state()],
    "avail": env.get_avail_actions(),
    "env_avail": [[int(a) for a in row] for row in u.get_avail_actions()],
}))
"""


def test_command_runs_epymarl_qmix_on_our_key_through_the_launcher() -> None:
    cmd = build_command("py", Path("/e"), "3m", 2, 1000, "epymarl")
    assert cmd[:4] == ["py", "-c", LAUNCHER, "/e/src/main.py"]
    assert cmd[4:7] == ["--config=qmix", "--env-config=gymma", "with"]
    over = cmd[7:]
    assert "env_args.key=marl.envs.smac.gym_view:marl/3m-v0" in over and "env_args.time_limit=60" in over
    assert {"seed=2", "t_max=1000", "use_cuda=False", "test_nepisode=100"} <= set(over)
    close = build_command("py", Path("/e"), "8m", 0, 10, "pymarl2", patched=False, extra=["lr=0.002"])
    assert close[:2] == ["py", "/e/src/main.py"]
    assert {"batch_size=128", "runner=parallel", "batch_size_run=8", "lr=0.001"} <= set(close)
    assert close[-1] == "lr=0.002"  # the user's overrides come last, so they win in Sacred
    with pytest.raises(ValueError, match="preset must be one of"):
        build_command("py", Path("/e"), "3m", 0, 10, "fast")


def test_launcher_gives_gymma_the_env_state_and_masks(tmp_path: Path) -> None:
    (tmp_path / "src" / "envs").mkdir(parents=True)
    (tmp_path / "src" / "envs" / "__init__.py").write_text("")
    (tmp_path / "src" / "envs" / "gymma.py").write_text(FAKE_GYMMA)
    (tmp_path / "src" / "main.py").write_text(FAKE_MAIN)
    key = "marl.envs.smac.gym_view:marl/3m-v0"
    out = subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(tmp_path / "src" / "main.py"), "with", key],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["argv"] == ["with", key]
    assert len(got["state"]) == 48 and got["state"] == pytest.approx(got["env_state"])  # 3m: 48, obs 3 x 30
    assert got["avail"] == got["env_avail"] and 0 in sum(got["avail"], [])  # attacks out of range at start


def _stamp(t0: float, s: float) -> str:
    return dt.datetime.fromtimestamp(t0 + s, dt.timezone.utc).replace(tzinfo=None).isoformat()


def test_sacred_metrics_give_steps_and_time_to_the_target() -> None:
    t0 = 1_800_000_000.0
    test = {"steps": [10_000, 20_000, 30_000], "values": [0.5, 0.96, 1.0]}
    test["timestamps"] = [_stamp(t0, s) for s in (50, 100, 150)]
    metrics = {
        "test_battle_won_mean": test,
        "return_mean": {"steps": [40_000], "values": [19.0], "timestamps": [_stamp(t0, 200)]},
    }
    figs = parse_metrics(metrics, launch=t0, target=0.95)
    assert figs["reached"] and (figs["t_env"], figs["win"]) == (20_000, 0.96)
    assert figs["launch_s"] == pytest.approx(100.0) and figs["steps_per_s"] == pytest.approx(200.0)
    assert (figs["best"], figs["tests"], figs["t_end"]) == (1.0, 3, 40_000)
    missed = parse_metrics(metrics, launch=t0, target=1.01)
    assert not missed["reached"] and missed["steps_per_s"] == pytest.approx(40_000 / 200)


def test_our_figures_are_read_from_learn_smacs_table() -> None:
    header = "| map | seed | reached | t_env at target | trainer clock at target | since launch "
    # the format parsed below
    assert header in (ROOT / "benchmarks" / "learning" / "learn_smac.py").read_text()
    text = (
        "# Learning benchmark\n\n"
        f"{header}| best test win rate | final | t_env run | run wall-clock | 1-min load (min–max) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
        "| 3m | 0 | yes | 151,900 | 3.30 min | 3.52 min | 1.00 | 1.00 | 151,900 | 3.6 min | 1.5–1.8 |\n"
        "| 8m | 0 | no | — | — | — | 0.50 | 0.40 | 90,000 | 20.0 min | 1.5–1.8 |\n"
        "| 3m | 1 | no | — | — | — | 0.80 | 0.70 | 90,000 | 20.0 min | 1.5–1.8 |\n"
    )
    rows = parse_learn_smac(text, "3m")
    assert [(r["seed"], r["reached"], r["t_env"]) for r in rows] == [(0, True, 151_900), (1, False, None)]
    assert rows[0]["launch_min"] == "3.52 min"
