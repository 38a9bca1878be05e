"""Process groups: one sweep, search or audit run by several processes, on one host or many.

A group is ``size`` processes started with the same command, each with its ``rank``
(``0 .. size − 1``) and the address of a coordinator (``HOST:PORT``, reachable from every
process; rank 0 listens there). They join JAX's distributed runtime
(:func:`jax.distributed.initialize`; on a CPU with the gloo collectives), after which
``jax.devices()`` lists every process's devices and the engines' meshes span the group: each
process computes its share of every chunk, and the chunk's reductions (envelope, candidates)
come back identical on every process. Results are the same as one process with the same total
device count, bit for bit (the sweep's randomness is a function of the block index only).

Who writes: rank 0 only (the *writer*) writes the run directory; the other processes run the
same code into a private scratch directory that is removed at exit. Where a process must act
on what is on disk — resuming a checkpoint, skipping an audit task that is already finished —
the writer's view is shared with the group (:func:`agree`, :func:`share_bytes`), so every
process takes the same branch and the collectives stay in step.

Joining is checked before JAX is involved, because JAX ends a process (``abort``, no
exception) when its coordinator cannot be reached: rank 0 opens a *lobby* on the coordinator's
port, every other rank connects to it (retrying until the timeout) and sends its rank, the
group size and a fingerprint of its command; rank 0 refuses a group whose sizes, ranks or
commands disagree — every process then exits with one line naming the problem — and only when
all ``size − 1`` have checked in closes the lobby and starts JAX's service on that port.

References:
  JAX multi-process: https://docs.jax.dev/en/latest/multi_process.html
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Mapping

import numpy as np

from jaxpriv.core.errors import InputError

ENVIRONMENT = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")
"""The variables a group can also be given by (the flags win)."""

DEFAULT_TIMEOUT = 120.0
"""Seconds a process waits for the whole group to join."""


@dataclasses.dataclass(frozen=True)
class Group:
    """One process's place in a group.

    Attributes:
      host, port: the coordinator (rank 0 listens on ``port``).
      size: processes in the group.
      rank: this process (0 writes the run directory).
      timeout: seconds to wait for the group to join.
    """

    host: str
    port: int
    size: int
    rank: int
    timeout: float = DEFAULT_TIMEOUT

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # IPv6 in brackets
        return f"{host}:{self.port}"


def settings(coordinator: str | None = None, num_processes: int | None = None,
             process_id: int | None = None, timeout: float = DEFAULT_TIMEOUT,
             environ: Mapping[str, str] = os.environ) -> Group | None:
    """The group a command was started in: from the flags, else from :data:`ENVIRONMENT`;
    ``None`` if neither names one. A group of one process is no group.

    Raises:
      InputError: a group named in part, or a setting out of range (one line naming it).
    """
    given = {"--coordinator": coordinator, "--num-processes": num_processes,
             "--process-id": process_id}
    if all(value is None for value in given.values()):
        given = {name: environ.get(variable) or None
                 for name, variable in zip(given, ENVIRONMENT)}
        source = dict(zip(given, ENVIRONMENT))
    else:
        source = {name: name for name in given}
    if all(value is None for value in given.values()):
        return None
    missing = [source[name] for name, value in given.items() if value is None]
    if missing:
        raise InputError(f"a process group needs {', '.join(missing)} as well (every process "
                         "is started with the coordinator's HOST:PORT, the number of processes "
                         "and its own id)")
    address = str(given["--coordinator"])
    host, _, port_text = address.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not host or not 0 < port < 65536:
        raise InputError(f"{source['--coordinator']} {address!r}: give the coordinator as "
                         "HOST:PORT (e.g. 127.0.0.1:23456)")
    size = _integer(given["--num-processes"], source["--num-processes"], 1)
    rank = _integer(given["--process-id"], source["--process-id"], 0)
    if rank >= size:
        raise InputError(f"{source['--process-id']} {rank} is not below "
                         f"{source['--num-processes']} {size} (ids run from 0)")
    if not (timeout > 0 and np.isfinite(timeout)):
        raise InputError(f"--coordinator-timeout must be a positive number of seconds, got "
                         f"{timeout}")
    if size == 1:
        return None
    return Group(host, port, size, rank, float(timeout))


def _integer(value, name: str, low: int) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise InputError(f"{name} must be an integer, got {value!r}") from None
    if number < low:
        raise InputError(f"{name} must be >= {low}, got {number}")
    return number


def join(group: Group, fingerprint: str) -> None:
    """Check the group in through the lobby, then join JAX's distributed runtime.

    Call before JAX computes anything (after the CPU device count is set). ``fingerprint``
    is what must agree across the group (the command's settings); a process whose
    fingerprint differs from rank 0's is refused, and so is the whole group.

    Raises:
      InputError: the coordinator was not reached, the group did not fill, or it disagrees.
    """
    if group.rank == 0:
        _host_lobby(group, fingerprint)
    else:
        _visit_lobby(group, fingerprint)
    import jax

    # CPU devices need a collectives library to talk across processes (the setting is read
    # only by the CPU backend; asking for the backend here would start it too early)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=group.address, num_processes=group.size,
                               process_id=group.rank,
                               initialization_timeout=max(1, int(group.timeout)))


def _send(connection: socket.socket, message: dict) -> None:
    connection.sendall((json.dumps(message) + "\n").encode())


def _receive(connection: socket.socket, deadline: float) -> dict | None:
    """One JSON line, or ``None`` if the peer closed or the deadline passed."""
    data = b""
    while not data.endswith(b"\n"):
        connection.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            piece = connection.recv(4096)
        except (socket.timeout, OSError):
            return None
        if not piece:
            return None
        data += piece
    try:
        message = json.loads(data)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _host_lobby(group: Group, fingerprint: str) -> None:
    """Rank 0: wait for ranks ``1 .. size − 1`` to check in with the same size and command."""
    deadline = time.monotonic() + group.timeout
    listener = socket.socket(socket.AF_INET6 if ":" in group.host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("", group.port))
    except OSError as error:
        listener.close()
        raise InputError(f"--coordinator {group.address}: process 0 cannot listen on port "
                         f"{group.port} ({error.strerror or error}); choose a free port") from None
    listener.listen(max(8, group.size))
    joined: list[socket.socket] = []
    ranks: set[int] = set()
    problem = None
    try:
        while len(joined) < group.size - 1 and problem is None:
            listener.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                connection, _ = listener.accept()
            except (socket.timeout, OSError):
                missing = sorted(set(range(1, group.size)) - ranks)
                problem = (f"only {len(joined) + 1} of {group.size} processes joined the group at "
                           f"{group.address} within {group.timeout:g} s (missing process id"
                           f"{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}); "
                           "start every process with the same command, or raise "
                           "--coordinator-timeout")
                break
            hello = _receive(connection, deadline)
            if hello is None or hello.get("lobby") != "jaxpriv":
                connection.close()  # not one of ours (a port scan, a stray client)
                continue
            rank = hello.get("rank")
            if hello.get("size") != group.size:
                problem = (f"process {rank} was started with {hello.get('size')} processes, "
                           f"process 0 with {group.size}; start every process with the same "
                           "--num-processes")
            elif not isinstance(rank, int) or not 0 < rank < group.size or rank in ranks:
                problem = (f"two processes were started with process id {rank}; give each "
                           f"process its own id from 0 to {group.size - 1}")
            elif hello.get("fingerprint") != fingerprint:
                problem = (f"process {rank} was started with a different command than process "
                           f"0{_differences(hello.get('fingerprint'), fingerprint)}; every "
                           "process of a group runs the same command (only --process-id, "
                           "--out and --cpu-devices may differ)")
            joined.append(connection)
            ranks.add(rank)
        listener.close()  # before anyone is let in, so JAX's own client never reaches the lobby
        for connection in joined:
            try:
                _send(connection, {"error": problem} if problem else {"ok": True})
            except OSError:  # that process is gone: the group cannot start
                problem = problem or ("a process left the group before it started; start "
                                      "every process again")
        for connection in joined:  # the clients close first: no TIME_WAIT on the port
            _receive(connection, time.monotonic() + 5.0)
    finally:
        listener.close()
        for connection in joined:
            connection.close()
    if problem:
        raise InputError(problem)


def _differences(theirs, ours: str) -> str:
    """`` (--count, --seed)`` — the settings two JSON fingerprints disagree on, if both are
    JSON objects; else nothing."""
    try:
        a, b = json.loads(theirs), json.loads(ours)
    except (TypeError, ValueError):
        return ""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return ""
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    names = [k if k in ("command", "jaxpriv") else "--" + k.replace("_", "-") for k in keys]
    return f" ({', '.join(names)})" if names else ""


def _visit_lobby(group: Group, fingerprint: str) -> None:
    """Rank ``r > 0``: reach the coordinator (retrying until the timeout) and check in."""
    deadline = time.monotonic() + group.timeout
    while True:
        try:
            connection = socket.create_connection((group.host, group.port), timeout=2.0)
            if _connected_to_itself(connection):
                # Linux may give a connection to a free local port that very port as its own
                # source port ("self-connect"): it then talks to itself and would read its own
                # hello back as an answer. Nobody listens there: keep trying.
                connection.close()
                raise ConnectionRefusedError(111, "Connection refused")
            break
        except OSError as error:
            if time.monotonic() > deadline:
                raise InputError(f"cannot reach the coordinator at {group.address} within "
                                 f"{group.timeout:g} s ({error.strerror or error}); start "
                                 "process 0 there, or check the address and port") from None
            time.sleep(0.2)
    try:
        _send(connection, {"lobby": "jaxpriv", "rank": group.rank, "size": group.size,
                           "fingerprint": fingerprint})
        # process 0 may have started later and still wait up to its own timeout for others
        answer = _receive(connection, deadline + group.timeout + 10.0)
    finally:
        connection.close()
    if answer is None:
        raise InputError(f"the coordinator at {group.address} did not admit process "
                         f"{group.rank} within {group.timeout:g} s (is it a jaxpriv process 0 "
                         "of this group?)")
    if answer.get("error"):
        raise InputError(str(answer["error"]))
    if answer.get("ok") is not True:
        raise InputError(f"the coordinator at {group.address} answered process {group.rank} "
                         "with something other than a jaxpriv lobby's answer (is it a jaxpriv "
                         "process 0 of this group?)")


def _connected_to_itself(connection: socket.socket) -> bool:
    """Whether a TCP connection's two ends are the same address and port (a self-connect)."""
    try:
        return connection.getsockname()[:2] == connection.getpeername()[:2]
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# within a running group (all identity functions in a single process)
# --------------------------------------------------------------------------------------------


def size() -> int:
    """Processes in the running group (1 without one)."""
    import jax

    return jax.process_count()


def rank() -> int:
    """This process's rank (0 without a group)."""
    import jax

    return jax.process_index()


def is_writer() -> bool:
    """Whether this process writes the run directory (rank 0; always, without a group)."""
    return rank() == 0


def agree(value: int) -> int:
    """The writer's ``value`` (a small integer), on every process of the group."""
    if size() == 1:
        return int(value)
    from jax.experimental import multihost_utils

    return int(np.asarray(multihost_utils.broadcast_one_to_all(np.int32(value))))


def share_bytes(data: bytes | None) -> bytes | None:
    """The writer's ``data`` (``None`` stays ``None``), on every process of the group."""
    if size() == 1:
        return data
    length = agree(-1 if data is None else len(data))
    if length < 0:
        return None
    from jax.experimental import multihost_utils

    mine = np.frombuffer(data, np.uint8) if is_writer() else np.zeros(length, np.uint8)
    return bytes(np.asarray(multihost_utils.broadcast_one_to_all(mine), np.uint8))


_SCRATCH: list[Path] = []


def scratch() -> Path:
    """This process's private scratch directory (made on first use, removed at exit): where a
    process other than the writer keeps what the writer keeps in the run directory."""
    if not _SCRATCH:
        _SCRATCH.append(Path(tempfile.mkdtemp(prefix=f"jaxpriv-rank{rank()}-")))
        atexit.register(shutil.rmtree, _SCRATCH[0], True)
    return _SCRATCH[0]


def in_scratch(path: str | os.PathLike) -> bool:
    """Whether ``path`` lies in this process's scratch directory."""
    return bool(_SCRATCH) and Path(path).resolve().is_relative_to(_SCRATCH[0].resolve())


@contextlib.contextmanager
def writer_first(open_writer, open_other=None, what: str = "open its run directory"):
    """Enter ``open_writer()`` (a context manager) on the writer and ``open_other()`` (default
    the same) on every other process, the writer first: if it fails there (a locked or refused
    directory, a plan of another audit), it says why and the others stop too, with one line,
    instead of waiting for it in the next collective. Without a group, just ``open_writer()``."""
    if size() == 1:
        with open_writer() as opened:
            yield opened
        return
    if is_writer():
        stack = contextlib.ExitStack()
        try:
            opened = stack.enter_context(open_writer())
        except BaseException:
            stack.close()
            agree(0)
            raise
        agree(1)
        with stack:
            yield opened
        return
    if not agree(0):
        raise InputError(f"process 0 could not {what} (see its message)")
    with (open_other or open_writer)() as opened:
        yield opened
