"""One TextWorldExpress game server (a JVM) per process, shared by every game in it (:func:`shared_server`; one game
handle, the jar's public ``PythonInterface``, per env). A server that dies (killed JVM, broken socket) turns into
one :class:`~ad.errors.UserError` saying how to resume.
"""
from __future__ import annotations

import atexit
import contextlib
import logging
from typing import Any, Iterator

from ad.errors import UserError
from tasks.textworld.java import find_java

_SERVER: "GameServer | None" = None

# py4j logs every lost connection with a traceback; a dead server is reported once, as a UserError, instead
_PY4J_LOG = logging.getLogger("py4j")
_PY4J_LOG.addHandler(logging.NullHandler())
_PY4J_LOG.propagate = False

#: The advice given when the game server stops in the middle of a run.
RESUME_ADVICE = "re-run the same command: it resumes after the last committed unit and loses nothing written"


class GameServer:
    """A JVM running the TextWorldExpress jar, reached through a py4j gateway."""

    def __init__(self, java: str | None = None) -> None:
        from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
        from textworld_express.constants import BASEPATH, JAR_PATH

        self.java = java or find_java()
        try:
            port, proc = launch_gateway(classpath=JAR_PATH, die_on_exit=True, cwd=BASEPATH, java_path=self.java,
                                        return_proc=True)
        except (OSError, Exception) as err:  # py4j raises a bare Py4JError when java fails to start
            raise UserError(f"could not start the TextWorldExpress game server with {self.java}: {err}") from None
        self.proc = proc
        self.gateway = JavaGateway(gateway_parameters=GatewayParameters(auto_field=True, port=port),
                                   java_process=proc)

    def new_game(self) -> Any:
        """A fresh game handle (the jar's ``PythonInterface``) in this JVM."""
        with server_errors("opening a game"):
            return self.gateway.jvm.textworldexpress.runtime.PythonInterface()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """Stop the JVM (idempotent)."""
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.gateway.shutdown()
            with contextlib.suppress(Exception):
                self.proc.stdin.write(b"\n")  # py4j's JVM exits when its stdin gets a line
                self.proc.stdin.flush()
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=5)
            if self.proc.poll() is None:
                self.proc.kill()


def shared_server() -> GameServer:
    """The process's game server, started on first use (again if the previous one died)."""
    global _SERVER
    if _SERVER is None or not _SERVER.alive:
        _SERVER = GameServer()
        atexit.register(_SERVER.close)
    return _SERVER


@contextlib.contextmanager
def server_errors(doing: str) -> Iterator[None]:
    """Turn a dead or unreachable game server into one UserError (what was being done + how to resume)."""
    from py4j.protocol import Py4JError, Py4JNetworkError

    if _SERVER is not None and not _SERVER.alive:  # died since the last call: say so without py4j's retries
        raise UserError(f"the TextWorldExpress game server (Java) stopped before {doing}; {RESUME_ADVICE}")
    try:
        yield
    except Py4JNetworkError as err:
        raise UserError(f"the TextWorldExpress game server (Java) stopped while {doing} ({str(err).splitlines()[0]})"
                        f"; {RESUME_ADVICE}") from None
    except Py4JError:
        if _SERVER is not None and not _SERVER.alive:
            raise UserError(f"the TextWorldExpress game server (Java) stopped while {doing}; {RESUME_ADVICE}") \
                from None
        raise
