"""Lazy, protobuf-safe loading of pysc2 and s2clientprotocol.

``s2clientprotocol``'s generated ``*_pb2`` modules predate protobuf 4 and only load under protobuf's pure
Python implementation (``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python``); with protobuf 7's default
``upb`` backend they fail with "Descriptors cannot be created directly". That variable is read once, when
protobuf first loads its implementation, so it must be set before *any* protobuf import in the process.

Facts this design rests on (checked with mindspore 2.10 and protobuf 7.36):

* ``import marl`` (and ``marl.envs.smac``, ``marl.envs.smac.sc2``) imports neither protobuf nor pysc2 and
  never touches the environment; only :func:`load_pysc2` does, and it is called only when a game is used.
* ``import mindspore`` itself sets ``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python`` when it is unset,
  before it loads protobuf. So setting the same value here changes nothing for MindSpore, whichever of
  the two is imported first.
* If protobuf was already loaded with another backend (the user exported ``upb``/``cpp``, or some other
  library imported protobuf before MindSpore), setting the variable is too late: :func:`load_pysc2` then
  raises :class:`Sc2Unavailable` saying exactly that, instead of pysc2's cryptic descriptor error.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import SimpleNamespace

from marl.envs.smac.sc2.install import INSTALL_HINT, Sc2Unavailable

PB_ENV = "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"
_API_MODULE = "google.protobuf.internal.api_implementation"
_LOADED: SimpleNamespace | None = None


def _ensure_python_protobuf() -> None:
    """Select protobuf's python backend if protobuf is not loaded yet, else check that it is in use."""
    if _API_MODULE not in sys.modules:
        os.environ[PB_ENV] = "python"
        return
    from google.protobuf.internal import api_implementation

    kind = api_implementation.Type()
    if kind != "python":
        raise Sc2Unavailable(
            f"pysc2 needs protobuf's pure-Python implementation, but protobuf was already loaded in this "
            f"process with the {kind!r} implementation ({PB_ENV}={os.environ.get(PB_ENV)!r}). Unset {PB_ENV} "
            "(or set it to 'python') before starting Python, or create the StarCraft II environment before "
            "importing the library that loads protobuf first."
        )


def load_pysc2() -> SimpleNamespace:
    """Import pysc2 and the protocol modules once; returns them as a namespace.

    Attributes: ``sc_pb`` (sc2api), ``raw_pb``, ``common_pb``, ``debug_pb``, ``run_configs``,
    ``protocol``, ``remote_controller``, ``sc_process`` and ``connection_errors`` (the exception types
    after which the game is relaunched).
    """
    global _LOADED
    if _LOADED is not None:
        return _LOADED
    _ensure_python_protobuf()
    try:
        with warnings.catch_warnings():
            # the old generated *_pb2 modules warn once per field under protobuf 7 (deprecated descriptors)
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"s2clientprotocol\.")
            from absl import flags
            from pysc2 import run_configs
            from pysc2.lib import protocol, remote_controller, sc_process
            from s2clientprotocol import common_pb2, debug_pb2, raw_pb2, sc2api_pb2
    except ImportError as err:
        raise Sc2Unavailable(f"pysc2 is not importable ({err}). {INSTALL_HINT}") from err
    if not flags.FLAGS.is_parsed():  # pysc2 reads absl flags (sc2_version, ...); use their defaults
        flags.FLAGS.mark_as_parsed()
    _LOADED = SimpleNamespace(
        sc_pb=sc2api_pb2,
        raw_pb=raw_pb2,
        common_pb=common_pb2,
        debug_pb=debug_pb2,
        run_configs=run_configs,
        protocol=protocol,
        remote_controller=remote_controller,
        sc_process=sc_process,
        connection_errors=(
            protocol.ConnectionError,
            protocol.ProtocolError,
            remote_controller.ConnectError,
            ConnectionError,
        ),
    )
    return _LOADED
