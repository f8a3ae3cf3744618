"""The ``marl`` command (``marl train | evaluate | sweep | report | board``) and the entry points that the
``scripts/`` wrappers share with it.

    marl train --alg qmix --map 3m          # any --alg; key=value overrides; --resume RUN_DIR
    marl evaluate --checkpoint results/<run>/models/best --episodes 32
    marl sweep --alg qmix --maps 3m 8m --seeds 3
    marl report results/sweep_qmix_<time>
    marl board [start|stop] [--results results] [--port 8080]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marl.checkpoint import CheckpointError, load_checked, load_latest, warn_nonfinite
from marl.config.cli import build_arg_parser, config_from_args
from marl.run_folder import RunFolderError
from marl.untrusted import os_error_line

# Bad input of any kind ends in one usage line (exit 2): config keys and values, names the registry does
# not know, map and Gymnasium ids, run folders, checkpoints that do not fit.
USAGE_ERRORS = (ValueError, KeyError, FileNotFoundError, RunFolderError, CheckpointError)


def _message(err: BaseException) -> str:
    return str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)


def train_main(prog: str, default_alg: str, description: str, argv: Sequence[str] | None = None) -> Path:
    """Parse the shared training CLI (``--map --alg --seed --resume key=value``) and train.

    Exit codes: 0 done (t_max or the stop file), 2 bad input (nothing written), 130/143 stopped by
    SIGINT/SIGTERM after saving a checkpoint, 1 stopped by a non-finite update or, after the first update,
    by a replay buffer that would outgrow the memory (no checkpoint written at the stop).
    """
    from marl.trainer import RunStopped, Trainer

    parser = build_arg_parser(prog, default_alg, description)
    args = parser.parse_intermixed_args(argv)  # key=value may come before and after the flags
    try:  # everything is validated before the run folder is written
        cfg = config_from_args(args)  # with --resume: the run's saved config plus command-line overrides
        trainer = Trainer(cfg, resume=Path(args.resume) if args.resume else None)
    except USAGE_ERRORS as err:  # ConfigError is a ValueError
        parser.error(_message(err))
    except OSError as err:  # full disk, read-only file system, permissions: nothing is left half-written
        parser.error(os_error_line(err, "cannot start the run"))
    except KeyboardInterrupt:
        _interrupted("before training began; no run folder was left half-written")
    try:
        return trainer.run()
    except RunStopped as stop:
        print(f"[run] {stop}", file=sys.stderr)
        raise SystemExit(stop.exit_code) from None
    except OSError as err:  # e.g. the disk filled up while logging; the checkpoints stay intact
        print(f"[run] {os_error_line(err, 'stopped')}; then --resume {trainer.run_dir}", file=sys.stderr)
        raise SystemExit(1) from None


def _interrupted(what: str) -> None:
    print(f"\n[marl] interrupted {what}", file=sys.stderr)
    raise SystemExit(130)


def evaluate_main(argv: Sequence[str] | None = None, prog: str = "evaluate.py") -> dict[str, Any]:
    """Greedy evaluation of a checkpoint; prints and returns the win rate and mean return."""
    from marl.evaluate import evaluate_payload

    p = argparse.ArgumentParser(
        prog=prog,
        description="Evaluate a checkpoint greedily (no exploration) and print the win rate.",
    )
    p.add_argument(
        "--checkpoint", required=True, help="a checkpoint folder (models/<t>) or a run folder (latest)"
    )
    p.add_argument("--map", dest="map_name", default=None, help="map/scenario (default: the one trained on)")
    p.add_argument("--backend", default=None, help="SMAC engine: sim | sc2 | auto (default: as trained)")
    p.add_argument("--episodes", type=int, default=32, help="number of test episodes (default 32)")
    p.add_argument("--envs", type=int, default=8, help="envs stepped together (default 8)")
    p.add_argument("--seed", type=int, default=12345, help="env seed")
    p.add_argument("--save-replay", action="store_true", help="save a replay of the last episode of env 0")
    p.add_argument(
        "--replay-format",
        choices=("gif", "mp4"),
        default=None,
        help="the replay's file format on the embedded engine (implies --save-replay; default gif; mp4 needs "
        "the 'replay' extra: imageio-ffmpeg)",
    )
    p.add_argument(
        "--device", default=None, help="MindSpore device: cpu | gpu | ascend (default: as trained)"
    )
    args = p.parse_args(argv)
    if args.episodes < 1 or args.envs < 1:
        p.error("--episodes and --envs must be >= 1")
    if args.replay_format:
        from marl.envs.smac.render import replay_format_error

        if (reason := replay_format_error(args.replay_format)) is not None:
            p.error(reason)  # before the evaluation, not after its episodes
        args.save_replay = True

    path = Path(args.checkpoint)
    try:  # a run folder: its newest intact checkpoint; a checkpoint folder: exactly that one
        from marl.trainer_state import check_payload

        if (path / "models").is_dir():
            payload = load_latest(path, check=check_payload)
        else:
            payload = load_checked(path, check_payload)
    except CheckpointError as err:
        p.error(str(err))
    warn_nonfinite(payload)
    try:
        full, replay = evaluate_payload(
            payload,
            args.episodes,
            args.envs,
            args.seed,
            args.map_name,
            args.backend,
            args.save_replay,
            device=args.device,
            replay_format=args.replay_format or "gif",
        )
    except ValueError as err:  # the environment does not fit the checkpoint
        p.error(str(err))
    except OSError as err:  # a replay that cannot be written, ...
        p.error(os_error_line(err, "evaluate"))
    keys = ("episodes", "win_rate", "return_mean", "ep_length_mean", "engine")  # engine: version, backend
    result = {k: full[k] for k in keys if k in full}
    cfg = payload["meta"]["config"]["env"]
    where = f"{args.map_name or cfg['map_name']} ({args.backend or cfg['backend']})"
    print(f"[evaluate] {payload['_checkpoint']['path']} on {where}: " + json.dumps(result))
    if replay:
        print(f"[evaluate] replay: {replay}")
    return result


def board_main(argv: Sequence[str] | None = None) -> int:
    """Start or stop MindInsight over a results folder (it lives in its own venv: ``make board-env``)."""
    p = argparse.ArgumentParser(
        prog="marl board",
        description="Serve every run folder under --results in MindInsight (installed by `make board-env`).",
    )
    p.add_argument("action", nargs="?", choices=("start", "stop"), default="start")
    p.add_argument("--results", default="results", help="the folder of run folders (default results)")
    p.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080)")
    p.add_argument(
        "--venv",
        default=os.environ.get("BOARD_VENV", ".venv-board"),
        help="MindInsight's virtual environment (default $BOARD_VENV or .venv-board)",
    )
    args = p.parse_args(argv)
    exe = Path(args.venv) / "bin" / "mindinsight"
    found = str(exe) if exe.is_file() else shutil.which("mindinsight")
    if found is None:
        p.error(
            f"MindInsight is not installed in {args.venv} nor on PATH; run `make board-env` "
            "(MindInsight 2.3.1 pins protobuf 3.20, which breaks MindSpore 2.10, so it has its own venv)"
        )
    bin_dir = str(Path(found).resolve().parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}  # it launches gunicorn
    if args.action == "stop":
        return subprocess.call([found, "stop", "--port", str(args.port)], env=env)
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    cmd = [found, "start", "--summary-base-dir", str(results.resolve()), "--port", str(args.port)]
    code = subprocess.call(cmd, env=env)
    if code == 0:
        print(f"MindInsight: http://127.0.0.1:{args.port}  (stop with: marl board stop --port {args.port})")
    return code


def _train(argv: Sequence[str]) -> int:
    train_main(
        "marl train",
        default_alg="qmix",
        description="Train any algorithm (--alg, default qmix) on SMAC, SMACv2, MPE or Gymnasium "
        "(--env sc2 | mpe | gym; the embedded SMAC engine by default).",
        argv=argv,
    )
    return 0


def _evaluate(argv: Sequence[str]) -> int:
    evaluate_main(argv, prog="marl evaluate")
    return 0


def _sweep(argv: Sequence[str]) -> int:
    from marl.sweep import sweep_main

    _, results = sweep_main(argv)
    return 1 if any(r.error for r in results) else 0


def _report(argv: Sequence[str]) -> int:
    from marl.report.cli import report_main

    return report_main(argv)


COMMANDS = {
    "train": (_train, "train one run (or --resume one)"),
    "evaluate": (_evaluate, "evaluate a checkpoint greedily"),
    "sweep": (_sweep, "maps x seeds as Ray tasks, with a summary and a multi-seed report"),
    "report": (_report, "multi-seed report (IQM, 95 % CIs) over run folders or run records"),
    "board": (board_main, "MindInsight over a results folder"),
}


def main(argv: Sequence[str] | None = None) -> int:
    """``marl <command> ...``: dispatch to the command's own parser (``marl <command> --help``).

    Run as the command (``argv`` None), a Ctrl-C from here on is one line and exit 130
    (:mod:`marl.interrupt`), also during the heavy imports and MindSpore's start-up below."""
    if argv is None:
        from marl.interrupt import exit_on_interrupt

        exit_on_interrupt()
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: marl {" + ",".join(COMMANDS) + "} ...\n\ncommands:\n"
    usage += "\n".join(f"  {name:<9} {what}" for name, (_, what) in COMMANDS.items())
    usage += "\n\n`marl <command> --help` lists the command's options."
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"marl: unknown command {argv[0]!r}; commands are {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    return COMMANDS[argv[0]][0](argv[1:])
