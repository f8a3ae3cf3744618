"""MindInsight sink: a MindSpore ``SummaryRecord`` with scalars, histograms and the config as text.

This is the one place outside ``modules/``, ``learners/`` and ``utils/ms.py`` that imports MindSpore (the
architecture names MindInsight as a Logger sink). MindSpore is imported lazily, through ``marl.utils.ms``
when that module exists (it sets the runtime environment first), so a Logger without MindInsight never
pays for the import.

Measured with MindSpore 2.10.0: ``add_value`` takes ``Tensor`` values only (plugins ``scalar``,
``histogram``, ``tensor``, ``image`` and the lineage kinds; there is no text plugin), nothing reaches the
file until ``record(step)``, and only one ``SummaryRecord`` may be open per process (a second raises
``RuntimeError``). Text therefore goes in as custom lineage data (``UserDefinedInfo.map_str``), which
MindInsight shows on its lineage page; it is written to a separate ``*_lineage`` file.
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from marl.logging.ms_writer import install as install_ms_writer


def _import_mindspore() -> Any:
    """Import MindSpore the project's way; return the module, or None when it cannot be imported."""
    try:
        import marl.utils.ms  # noqa: F401  (sets MindSpore's runtime environment before the import)
    except ImportError:
        os.environ.setdefault("MS_DEV_HOST_BLOCKING_RUN", "1")
    try:
        import mindspore
    except Exception as exc:  # any import failure only disables this sink
        warnings.warn(f"MindInsight summaries disabled: cannot import mindspore ({exc})", stacklevel=3)
        return None
    return mindspore


class SummarySink:
    """Writes MindInsight summary files into ``summary_dir`` (created when missing)."""

    def __init__(self, summary_dir: str | Path) -> None:
        self.summary_dir = Path(summary_dir)
        self._ms = _import_mindspore()
        self._record: Any = None
        if self._ms is None:
            return
        self.summary_dir.mkdir(parents=True, exist_ok=True)
        install_ms_writer(self._ms)  # MindSpore 2.10's writer process busy-waits; see ms_writer.py
        try:
            # one packing worker is plenty for scalars; the default forks one per core
            self._record = self._ms.SummaryRecord(str(self.summary_dir), num_process=1)
        except RuntimeError as exc:  # another SummaryRecord is open in this process
            warnings.warn(f"MindInsight summaries disabled for {self.summary_dir}: {exc}", stacklevel=2)
            self._record = None

    @property
    def active(self) -> bool:
        """True while summaries are being written."""
        return self._record is not None

    def scalar(self, key: str, value: float, step: int) -> None:
        """Record one scalar at ``step`` (NaN and inf are skipped: MindInsight cannot plot them)."""
        if self._record is None or not math.isfinite(value):
            return
        self._record.add_value("scalar", key, self._ms.Tensor(np.float32(value)))
        self._record.record(int(step))

    def histogram(self, key: str, values: np.ndarray, step: int) -> None:
        """Record the distribution of ``values`` (any shape; non-finite entries are dropped)."""
        if self._record is None:
            return
        flat = np.asarray(values, dtype=np.float32).reshape(-1)
        flat = flat[np.isfinite(flat)]
        if flat.size == 0:
            return
        self._record.add_value("histogram", key, self._ms.Tensor(flat))
        self._record.record(int(step))

    def text(self, key: str, text: str) -> None:
        """Record ``text`` under ``key`` as custom lineage data."""
        if self._record is None:
            return
        from mindspore.train import lineage_pb2

        info = lineage_pb2.UserDefinedInfo()
        info.user_info.add().map_str[key] = text
        self._record.add_value("custom_lineage_data", key, info)
        self._record.record(0)

    def lineage(
        self, network: str, hparams: dict[str, Any], metrics: dict[str, float], train_size: int
    ) -> None:
        """Record the run for MindInsight's model-lineage comparison: a ``train_lineage`` event (network =
        the algorithm; ``hparams``' ``lr``, ``batch_size`` and ``optimizer`` when present; train size = env
        steps), an ``eval_lineage`` event whose metrics are ``metrics``, and every hyper-parameter as
        custom data (numbers as doubles, the rest as strings). MindInsight 2.3.1 lists them side by side
        on its lineage page (``POST /v1/mindinsight/lineagemgr/lineages``, tested)."""
        if self._record is None:
            return
        import json

        from mindspore.train import lineage_pb2

        train = lineage_pb2.TrainLineage()
        train.algorithm.network = network
        hp = train.hyper_parameters
        if "lr" in hparams:
            hp.learning_rate = float(hparams["lr"])
        if "batch_size" in hparams:
            hp.batch_size = int(hparams["batch_size"])
        if "optimizer" in hparams:
            hp.optimizer = str(hparams["optimizer"])
        train.train_dataset.train_dataset_size = int(train_size)
        self._record.add_value("train_lineage", "train_lineage", train)
        evaluation = lineage_pb2.EvaluationLineage()
        evaluation.metric = json.dumps({k: float(v) for k, v in metrics.items() if math.isfinite(float(v))})
        self._record.add_value("eval_lineage", "eval_lineage", evaluation)
        info = lineage_pb2.UserDefinedInfo()
        for key, value in hparams.items():
            entry = info.user_info.add()
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                entry.map_double[key] = float(value)
            else:
                entry.map_str[key] = str(value)
        self._record.add_value("custom_lineage_data", "hyper_parameters", info)
        self._record.record(int(train_size))

    def flush(self) -> None:
        """Push buffered events to disk."""
        if self._record is not None:
            self._record.flush()

    def close(self) -> None:
        """Flush and close the SummaryRecord (idempotent)."""
        if self._record is not None:
            self._record.close()
            self._record = None
