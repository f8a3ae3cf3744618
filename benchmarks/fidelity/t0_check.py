"""T=0 check: the game's untrained greedy test play (the SMAC paper's runs) against the engine's random and
untrained-greedy play, map by map (issue 45, item 5).

The game: every published run's first test phase (t_env below 1.5k steps for the value-based algorithms,
a few hundred for COMA; ``benchmarks/data/smac_paper_runs.json``): 32 greedy episodes of a freshly initialised
network. Median and range over runs, all algorithms pooled.

The engine, with SMAC's default reward (pymarl's ``sc2.yaml``: positive only, scaled to 20, 10 per kill,
200 for a win, which are the library's defaults):

* ``random``: every living agent picks uniformly among its available actions (one pooled sample).
* ``greedy``: pymarl's RNN agent (fc 64, ReLU, GRUCell 64, fc to Q; inputs: observation, last action
  one-hot, agent id one-hot; hidden state zero at reset), freshly initialised as PyTorch initialises it
  (``nn.Linear``: weights and biases U(±1/sqrt(fan_in)); ``nn.GRUCell``: U(±1/sqrt(64))), acting greedily
  over the available actions. Each seed is one network (one deterministic policy), as each game run was.

A map is flagged when the engine's greedy median win rate lies outside the game's T=0 range widened by the
sampling error of 32 test episodes (Wilson), or its greedy median return outside the game's return range
widened by 1.96 standard errors of a 32-episode mean.

    .venv/bin/python benchmarks/fidelity/t0_check.py   # 14 maps, 64 random + 4 x 32 greedy episodes
    .venv/bin/python benchmarks/fidelity/t0_check.py --maps 2c_vs_64zg --sim-rules noretaliate --out -
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from marl.envs.smac.research import variant_env  # noqa: E402
from marl.envs.smac.sim.variants import parse_rules  # noqa: E402
from marl.report.paper_runs import Band, load_paper_runs, wilson  # noqa: E402

PAPER_MAPS = (
    "2s_vs_1sc", "2s3z", "3s5z", "1c3s5z", "10m_vs_11m", "2c_vs_64zg", "bane_vs_bane",
    "5m_vs_6m", "3s_vs_5z", "3s5z_vs_3s6z", "6h_vs_8z", "27m_vs_30m", "MMM2", "corridor",
)  # fmt: skip
HIDDEN = 64
FIRST_TEST_MAX = 1_500  # a run's first test counts as T=0 when it comes this early (COMA's: any first test)


def game_t0(map_name: str) -> tuple[Band, Band, int]:
    """The game's T=0 win-rate and return bands over every run's first test phase (all algorithms)."""
    wins, rets = [], []
    for (m, alg), runs in load_paper_runs().items():
        if m != map_name:
            continue
        for r in runs:
            if alg == "COMA" or r.t_env[0] <= FIRST_TEST_MAX:
                wins.append(r.won[0] / 32.0)
                rets.append(float(r.ret[0]))
    if not wins:
        raise ValueError(f"no paper runs for map {map_name!r}")

    def b(v: list[float]) -> Band:
        return Band(len(v), float(np.min(v)), float(np.median(v)), float(np.max(v)))

    return b(wins), b(rets), len(wins)


class UntrainedRNN:
    """pymarl's ``RNNAgent`` with PyTorch's default initialisation, in numpy."""

    def __init__(self, in_dim: int, n_actions: int, rng: np.random.Generator) -> None:
        def u(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
            k = 1.0 / np.sqrt(fan_in)
            return rng.uniform(-k, k, size=shape)

        self.w1_HI, self.b1_H = u((HIDDEN, in_dim), in_dim), u((HIDDEN,), in_dim)
        self.wi_GH, self.wh_GH = u((3 * HIDDEN, HIDDEN), HIDDEN), u((3 * HIDDEN, HIDDEN), HIDDEN)
        self.bi_G, self.bh_G = u((3 * HIDDEN,), HIDDEN), u((3 * HIDDEN,), HIDDEN)
        self.w2_AH, self.b2_A = u((n_actions, HIDDEN), HIDDEN), u((n_actions,), HIDDEN)

    def step(self, x_BI: np.ndarray, h_BH: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Q-values (B, A) and the next hidden state (B, H) (``torch.nn.GRUCell``'s equations)."""
        x_BH = np.maximum(x_BI @ self.w1_HI.T + self.b1_H, 0.0)
        gi_BG = x_BH @ self.wi_GH.T + self.bi_G
        gh_BG = h_BH @ self.wh_GH.T + self.bh_G
        H = HIDDEN
        r = 1.0 / (1.0 + np.exp(-(gi_BG[:, :H] + gh_BG[:, :H])))
        z = 1.0 / (1.0 + np.exp(-(gi_BG[:, H : 2 * H] + gh_BG[:, H : 2 * H])))
        n = np.tanh(gi_BG[:, 2 * H :] + r * gh_BG[:, 2 * H :])
        h_BH = (1.0 - z) * n + z * h_BH
        return h_BH @ self.w2_AH.T + self.b2_A, h_BH


def play(map_name: str, policy: str, episodes: int, seed: int, sim_rules: str = "") -> dict[str, np.ndarray]:
    """``episodes`` episodes (all at once, one env each) of ``random`` or ``greedy`` (network seed ``seed``);
    per-episode return and win."""
    env = variant_env(map_name, episodes, seed, sim_rules)
    E, N, A = env.n_envs, env.n_agents, env.n_actions
    rng = np.random.default_rng(seed)
    obs_ENO, _ = env.reset()
    net = UntrainedRNN(obs_ENO.shape[-1] + A + N, A, rng) if policy == "greedy" else None
    h_BH = np.zeros((E * N, HIDDEN))
    last_ENA = np.zeros((E, N, A))
    ids_ENN = np.broadcast_to(np.eye(N), (E, N, N))
    running = np.ones(E, dtype=bool)
    ret, won = np.zeros(E), np.zeros(E, dtype=bool)
    while running.any():
        avail_ENA = env.get_avail_actions()
        if net is None:
            act_EN = (rng.random(avail_ENA.shape) * avail_ENA).argmax(-1)
        else:
            x = np.concatenate([env.get_obs(), last_ENA, ids_ENN], axis=-1).reshape(E * N, -1)
            q_BA, h_BH = net.step(x, h_BH)
            act_EN = np.where(avail_ENA.reshape(E * N, A) > 0, q_BA, -np.inf).argmax(-1).reshape(E, N)
        last_ENA = np.eye(A)[act_EN]
        r_E, term_E, info = env.step(act_EN, running)
        ret[running] += r_E[running]
        won |= running & term_E & info["battle_won"]
        running &= ~term_E
    env.close()
    return {"return": ret, "won": won}


def fmt_band(b: Band, pct: bool) -> str:
    f = (lambda v: f"{100 * v:.0f}") if pct else (lambda v: f"{v:.1f}")
    return f"{f(b.median)} [{f(b.lo)}, {f(b.hi)}]"


def check_map(map_name: str, episodes: int, seeds: int, sim_rules: str) -> tuple[str, bool]:
    """One table row and whether the map is flagged."""
    gw, gr, nruns = game_t0(map_name)
    rnd = play(map_name, "random", 2 * episodes, 0, sim_rules)
    greedy = [play(map_name, "greedy", episodes, 1 + s, sim_rules) for s in range(seeds)]
    gw_seed = np.array([g["won"].mean() for g in greedy])
    gr_seed = np.array([g["return"].mean() for g in greedy])
    sd = float(np.mean([g["return"].std(ddof=1) for g in greedy]))
    w_lo, w_hi = wilson(gw.lo, 32)[0], wilson(gw.hi, 32)[1]
    half = 1.96 * sd / np.sqrt(32)
    win_ok = w_lo <= float(np.median(gw_seed)) <= w_hi
    ret_ok = gr.lo - half <= float(np.median(gr_seed)) <= gr.hi + half
    lo, hi = wilson(float(rnd["won"].mean()), len(rnd["won"]))
    verdict = (
        "consistent"
        if win_ok and ret_ok
        else "**inconsistent** ("
        + ", ".join(k for k, ok in (("win rate", win_ok), ("return", ret_ok)) if not ok)
        + ")"
    )
    row = (
        f"| {map_name} | {nruns} | {fmt_band(gw, True)} | {fmt_band(gr, False)} | "
        f"{100 * rnd['won'].mean():.0f} [{100 * lo:.0f}, {100 * hi:.0f}] | {rnd['return'].mean():.1f} | "
        f"{100 * np.median(gw_seed):.0f} [{100 * gw_seed.min():.0f}, {100 * gw_seed.max():.0f}] | "
        f"{np.median(gr_seed):.1f} [{gr_seed.min():.1f}, {gr_seed.max():.1f}] | {verdict} |"
    )
    return row, not (win_ok and ret_ok)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--maps", nargs="+", default=list(PAPER_MAPS), choices=PAPER_MAPS, metavar="MAP")
    ap.add_argument("--episodes", type=int, default=32, help="greedy episodes per network seed (>= 8)")
    ap.add_argument("--seeds", type=int, default=4, help="untrained networks per map (>= 2)")
    ap.add_argument("--sim-rules", default="", help="candidate targeting rules (sim/variants.py); a probe")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "t0_check.md"), help="'-': none")
    args = ap.parse_args()
    if args.episodes < 8 or args.seeds < 2:
        ap.error(f"--episodes must be >= 8 and --seeds >= 2, got {args.episodes} and {args.seeds}")
    try:
        parse_rules(args.sim_rules)
    except ValueError as err:
        ap.error(str(err))
    run = harness.start()
    head = (
        "| map | game runs | game win % | game return | engine random win % | random return | "
        "engine greedy win % | greedy return | verdict |"
    )
    rows, flagged = [head, "|" + "---|" * 9], []
    print(head, flush=True)
    for m in args.maps:
        row, bad = check_map(m, args.episodes, args.seeds, args.sim_rules)
        rows.append(row)
        flagged += [m] if bad else []
        print(row, flush=True)
    lines = [
        "# T=0 check: the game's untrained greedy play against the engine's random and untrained greedy play",
        "",
        *harness.header_lines(run, __file__, sys.argv[1:]),
        *(
            [f"- targeting: candidate rules `{args.sim_rules}` (sim/variants.py), not the engine's"]
            if args.sim_rules
            else []
        ),
        "- game: every published run's first test phase (32 greedy episodes of an untrained network; "
        "`benchmarks/data/smac_paper_runs.json`, SC2 4.6.2), all algorithms pooled: median [min, max] "
        "over runs",
        f"- engine: random = uniform over available actions, {2 * args.episodes} episodes, win % "
        "[Wilson 95 %]; "
        f"greedy = {args.seeds} freshly initialised pymarl RNN agents (PyTorch's default init), "
        f"{args.episodes} episodes each: median [min, max] over networks; SMAC's default reward (pymarl's)",
        "- verdict: the engine's greedy median outside the game's range widened by the sampling error of 32 "
        "episodes (win rate: Wilson; return: 1.96 standard errors) is inconsistent",
        "",
        *rows,
        "",
        f"Inconsistent: {', '.join(flagged) if flagged else 'none'}.",
    ]
    print(lines[-1])
    if args.out != "-":
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
