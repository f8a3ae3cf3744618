"""Episode replay buffer with uniform sampling (NumPy only)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from marl.buffers.episode import EpisodeBatch, Scheme

# The share of the memory available at start that a replay buffer may take (the learner, the envs and the
# compiled step need the rest).
MEMORY_SHARE = 0.8


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # cgroup's "max" means no limit


def available_memory() -> int | None:
    """Bytes a new process can still use: Linux's ``MemAvailable``, capped by a cgroup v2 memory limit.

    ``None`` where neither is readable (the check that uses it is then skipped).
    """
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    limit, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        avail = limit - used if avail is None else min(avail, limit - used)
    return avail


def process_rss() -> int | None:
    """This process's resident memory in bytes (Linux ``/proc/self/statm``); ``None`` elsewhere."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def reset_peak_rss() -> int | None:
    """Start a new peak for :func:`peak_rss` (Linux: writing 5 to ``/proc/self/clear_refs`` sets the
    process's peak to its current resident memory); returns the current resident memory."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return process_rss()


def peak_rss() -> int | None:
    """This process's peak resident memory in bytes (Linux ``VmHWM``): since :func:`reset_peak_rss` where
    the kernel lets it reset the peak, else since the process began (larger: the check errs on the safe
    side); where it cannot be read, the current resident memory."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return max(int(line.split()[1]) * 1024, process_rss() or 0)
    except (OSError, ValueError, IndexError):
        pass
    return process_rss()


def rows_that_fit(rest: int, step_bytes: int, footprint: int, slots: int, available: int) -> int:
    """The most episodes one graph of the update may take (``learner.update_rows``) so that ``rest`` bytes
    still to come (the buffer's) and the update on full-length episodes of ``slots`` slots fit in
    ``MEMORY_SHARE`` of ``available``; the update's memory taken as proportional to its episodes x slots,
    ``step_bytes`` for the ``footprint`` of the first update (0 where even one episode does not fit)."""
    per_row = max(step_bytes, 1) * slots / max(footprint, 1)
    return max(int((MEMORY_SHARE * available - rest + step_bytes) // per_row), 0)


def _rows_text(rows: int, kept: str) -> str:
    """The stop message's ``learner.update_rows`` suggestion (empty where ``rows`` is 0)."""
    if rows <= 0:
        return ""
    return (
        f", or keep {kept} with learner.update_rows={rows} (the same update in parts of at most {rows} "
        f"episodes, gradients summed)"
    )


def fill_shortfall(
    capacity: int,
    size: int,
    bytes_per_episode: int,
    rss: int | None,
    available: int | None,
    growth: int = 0,
    rows_hint: int = 0,
) -> str | None:
    """After the first update: a message when what is still to come, the ``capacity - size`` episodes the
    buffer has yet to take plus ``growth`` bytes (the learner's step on longer episodes, see the trainer),
    needs more than ``MEMORY_SHARE`` of the ``available`` bytes, else None. ``rows_hint`` > 0: the message
    also names ``learner.update_rows`` of that many episodes (:func:`rows_that_fit`), which keeps the buffer.

    The check at construction counts the buffer alone; the first update shows what the learner's step
    takes beside it (``rss``, this process's memory now), which on large maps is several GiB (bane_vs_bane,
    batch 128, full-length episodes: about 6 GiB). Without this check such a run would be killed by the OS
    when the buffer fills.
    """
    if available is None or rss is None:
        return None
    need = max(capacity - size, 0) * bytes_per_episode + max(growth, 0)
    allowed = int(MEMORY_SHARE * available)
    if need <= allowed:
        return None
    gib = 2**30
    fits = size + max(allowed - max(growth, 0), 0) // bytes_per_episode
    return (
        f"the replay buffer would outgrow the memory: after the first update this process holds "
        f"{rss / gib:.1f} GiB ({size} of {capacity} episodes stored, the learner's step included); the "
        f"{max(capacity - size, 0)} episodes still to come and the learner's step on full-length episodes "
        f"({max(growth, 0) / gib:.1f} GiB more than now) need {need / gib:.1f} GiB more, but only "
        f"{available / gib:.1f} GiB are available ({int(MEMORY_SHARE * 100)} % of it may go to them), so the "
        f"OS would kill the run part-way. Start again with learner.buffer_size={fits} or less, or "
        f"learner.buffer_max_gib={fits * bytes_per_episode / gib:.1f} or less"
        + _rows_text(rows_hint, "the buffer")
        + " (learner.memory_check=false runs on regardless)"
    )


def update_shortfall(
    batch_size: int, rss: int | None, available: int | None, growth: int, rows_hint: int = 0
) -> str | None:
    """On-policy learners (no replay buffer), after the first update: a message when the update, grown to
    full-length episodes (``growth`` bytes more than now, see the trainer), needs more than ``MEMORY_SHARE``
    of the ``available`` bytes, else None. The sizes suggested assume that the update's memory grows with
    its episodes; ``rows_hint`` > 0 also names ``learner.update_rows`` (as :func:`fill_shortfall`)."""
    if available is None or rss is None:
        return None
    allowed = int(MEMORY_SHARE * available)
    if growth <= allowed:
        return None
    gib = 2**30
    fits = max(batch_size * allowed // max(growth, 1), 1)
    return (
        f"the learner's update would outgrow the memory: after the first update this process holds "
        f"{rss / gib:.1f} GiB; an update of learner.batch_size={batch_size} full-length episodes needs about "
        f"{growth / gib:.1f} GiB more (the first update's growth scaled to full-length episodes), but only "
        f"{available / gib:.1f} GiB are available ({int(MEMORY_SHARE * 100)} % of it may go to it), so the "
        f"OS would kill the run part-way. Start again with learner.batch_size={fits} or less (a multiple of "
        f"runner.batch_size_run), or more learner.num_minibatches"
        + _rows_text(rows_hint, "the batch")
        + " (learner.memory_check=false runs on regardless)"
    )


def check_fits(scheme: Scheme, capacity: int, available: int | None) -> None:
    """Refuse a buffer that cannot fit in ``MEMORY_SHARE`` of ``available`` bytes, naming a size that fits.

    NumPy's zeroed arrays take memory only as episodes are written, so without this check a too-large buffer
    would not fail at start but hours later, when the OS kills the run.
    """
    if available is None:
        return
    per_episode = scheme.bytes_per_episode()
    need, allowed = capacity * per_episode, int(MEMORY_SHARE * available)
    if need <= allowed:
        return
    fits = allowed // per_episode
    gib = 2**30
    raise ValueError(
        f"learner.buffer_size={capacity} episodes of {scheme.max_seq_length} slots "
        f"({per_episode / 2**20:.1f} MiB each) need {need / gib:.1f} GiB, but only {available / gib:.1f} GiB "
        f"of memory is available ({int(MEMORY_SHARE * 100)} % of it may go to the buffer); the buffer fills "
        f"as episodes arrive, so the run would be killed part-way. Use learner.buffer_size={fits} or less"
        + (
            f", or learner.buffer_max_gib={allowed / gib:.1f} or less (a cap in GiB, for all maps)"
            if fits >= 1
            else "; even one episode does not fit"
        )
    )


def episodes_in(max_gib: float, bytes_per_episode: int) -> int:
    """How many padded episodes of ``bytes_per_episode`` bytes ``max_gib`` GiB holds."""
    return int(max_gib * 2**30) // bytes_per_episode


def capped_capacity(scheme: Scheme, buffer_size: int, max_gib: float, batch_size: int) -> int:
    """``buffer_size`` episodes, or fewer where they would take more than ``max_gib`` GiB (0: no cap).

    One setting for every map of a sweep: it changes only the maps whose padded episodes are large.
    """
    if max_gib <= 0:
        return buffer_size
    per_episode = scheme.bytes_per_episode()
    fits = episodes_in(max_gib, per_episode)
    if fits < batch_size:
        raise ValueError(
            f"learner.buffer_max_gib={max_gib} holds {fits} episodes of this environment "
            f"({per_episode / 2**20:.1f} MiB each), fewer than learner.batch_size={batch_size}; "
            f"allowed: 0 (no cap) or at least {batch_size * per_episode / 2**30:.2f}"
        )
    if fits < buffer_size:
        print(
            f"[buffer] learner.buffer_max_gib={max_gib}: {fits} episodes instead of buffer_size={buffer_size}"
        )
    return min(buffer_size, fits)


class ReplayBuffer:
    """A ring buffer of ``capacity`` padded episodes.

    Its size is printed, and checked at construction against the memory available (``available`` bytes;
    default: read from the machine), so a too-large buffer fails at start, not hours into a run.
    """

    def __init__(
        self, scheme: Scheme, capacity: int, verbose: bool = True, available: int | None = None
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"buffer_size must be a positive number of episodes, got {capacity}")
        check_fits(scheme, capacity, available_memory() if available is None else available)
        self.scheme = scheme
        self.capacity = capacity
        self.storage = EpisodeBatch(scheme, capacity)
        self.index = 0  # next slot to write
        self.size = 0  # episodes stored
        self.episodes_in = 0  # episodes ever inserted
        if verbose:
            mib = self.storage.nbytes() / 2**20
            print(
                f"[buffer] {capacity} episodes x {scheme.max_seq_length} slots: {mib:.1f} MiB "
                f"({scheme.bytes_per_episode() / 1024:.1f} KiB per episode)"
            )

    def insert(self, batch: EpisodeBatch) -> None:
        """Copy the episodes of ``batch`` in, overwriting the oldest when full."""
        n = batch.batch_size
        idx = (self.index + np.arange(n)) % self.capacity
        for k, v in batch.data.items():
            self.storage.data[k][idx] = v
        self.index = int((self.index + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)
        self.episodes_in += n

    def can_sample(self, batch_size: int) -> bool:
        return self.size >= batch_size

    def sample(self, batch_size: int, rng: np.random.Generator) -> EpisodeBatch:
        """``batch_size`` distinct episodes chosen uniformly."""
        if not self.can_sample(batch_size):
            raise ValueError(f"cannot sample {batch_size} episodes from a buffer holding {self.size}")
        idx = rng.choice(self.size, size=batch_size, replace=False)
        return self.storage.select(idx)

    def state_dict(self) -> dict:
        """Counters (the episodes themselves are not checkpointed)."""
        return {"index": self.index, "size": self.size, "episodes_in": self.episodes_in}
