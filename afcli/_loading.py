"""Finding the agent ``af run`` was pointed at.

``AGENT`` is ``file.py``, ``file.py:attr`` or ``module:attr``; the attribute is an
:class:`Agent` or a flow (``afcore.flows``), or a function taking no arguments that returns
one. A file that defines exactly one flow at module level (not counting the flows inside
it), or else exactly one Agent, needs no attribute. Every way this can fail is a
:class:`LoadError`: one sentence, exit code 2.
"""

from __future__ import annotations

import copy
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from afcli._errors import EXIT_USAGE, CliError, key_words

if TYPE_CHECKING:
    from afcore import Agent
    from afcore.flows import Flow

__all__ = ["UNNAMED", "LoadError", "Loaded", "load_agent", "names_an_agent", "prepare"]

UNNAMED = "agent"
"""The name of an agent built without ``Agent.create(name=...)``."""


class LoadError(CliError):
    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


@dataclass(frozen=True)
class Loaded:
    agent: Agent | Flow
    source: str
    """What was loaded, for the recording: ``examples/bot.py:agent``, never an absolute path."""
    name: str
    """The attribute it was found under (``agent``, ``make``)."""

    @property
    def named(self) -> Agent | Flow:
        """The agent, known by the name it was loaded by when it was built without one (a
        flow: itself)."""
        from afcore import Agent

        if not isinstance(self.agent, Agent) or self.agent.name != UNNAMED:
            return self.agent
        agent = copy.copy(self.agent)
        agent.name = self.name
        return agent


def names_an_agent(spec: str) -> bool:
    """Whether ``spec`` reads as an agent to load (a file, ``file:attr``, a path, a module
    that can be found) rather than as a message."""
    if spec.endswith(".py") or any(sep in spec for sep in ("/", "\\", ":")):
        return True
    try:
        if Path(spec).exists():
            return True
    except OSError:
        return False
    if not all(part.isidentifier() for part in spec.split(".")):
        return False
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.util.find_spec(spec.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def load_agent(spec: str) -> Loaded:
    where, attr = _split(spec)
    if _is_file(where):
        shown = _display_path(Path(where))
        module = _load_file(Path(where), shown)
    else:
        shown = where
        module = _load_module(where)
    name, obj = _pick(module, attr, shown)
    target = f"{shown}:{name}"
    return Loaded(agent=_as_agent(obj, target), source=target, name=name.rpartition(".")[2])


def _split(spec: str) -> tuple[str, str | None]:
    where, sep, attr = spec.rpartition(":")
    # `C:\bots\x.py` or `dir:x/bot.py`: what follows the colon is a path, not an attribute.
    if not sep or not attr or "/" in attr or "\\" in attr or attr.endswith(".py"):
        return spec, None
    if not where:
        raise LoadError(f"{spec!r} names no file or module before the colon")
    if not all(part.isidentifier() for part in attr.split(".")):
        raise LoadError(f"{attr!r} in {spec!r} is not a Python attribute name")
    return where, attr


def _is_file(where: str) -> bool:
    return (
        where.endswith(".py")
        or "/" in where
        or os.sep in where
        or (os.altsep is not None and os.altsep in where)
        or Path(where).is_file()
    )


def _display_path(path: Path) -> str:
    """The path as given, or relative to the current folder: recordings hold no absolute
    paths of the machine they were made on."""
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.name


def _module_name(path: Path) -> str:
    stem = path.stem if path.stem.isidentifier() else "agent_file"
    name, n = stem, 1
    while name in sys.modules:
        n += 1
        name = f"{stem}_{n}"
    return name


def _load_file(path: Path, shown: str) -> ModuleType:
    if not path.exists():
        raise LoadError(f"no such file: {shown}")
    if path.is_dir():
        raise LoadError(f"{shown} is a folder; give a Python file, as {shown}/bot.py:agent")
    name = _module_name(path)
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    if spec is None:  # pragma: no cover - a SourceFileLoader always gives a spec
        raise LoadError(f"cannot load {shown} as Python")
    module = importlib.util.module_from_spec(spec)
    # As `python file.py` would: its own folder first, so it can import its neighbours.
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException as e:
        sys.modules.pop(name, None)
        raise _import_failure(e, shown) from e
    return module


def _load_module(name: str) -> ModuleType:
    if Path(name).is_dir():
        raise LoadError(
            f"{name} is a folder; give a Python file in it, as {name}/bot.py (or "
            f"{name}/bot.py:NAME)"
        )
    if not all(part.isidentifier() for part in name.split(".")):
        raise LoadError(f"{name!r} is neither a .py file nor a module name")
    # The console script does not put the current folder on sys.path; `python -m` does.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            raise LoadError(
                f"no module named {name!r} in the current folder or the installed packages"
            ) from e
        raise _import_failure(e, name) from e
    except BaseException as e:
        raise _import_failure(e, name) from e


def _import_failure(e: BaseException, shown: str) -> BaseException:
    if isinstance(e, KeyboardInterrupt):
        return e
    if isinstance(e, SyntaxError):
        where = _display_path(Path(e.filename)) if e.filename else shown
        at = f", line {e.lineno}" if e.lineno is not None else ""  # None: NUL bytes, say
        return LoadError(f"cannot load {shown}: syntax error in {where}{at}: {e.msg}")
    missing = key_words(e)
    if missing is not None:
        return LoadError(f"cannot load {shown}: {missing}")
    if isinstance(e, SystemExit):
        return LoadError(f"{shown} called exit({e.code!r}) while loading")
    return LoadError(f"loading {shown} raised {type(e).__name__}: {_first_line(e)}")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else "(no message)"


def _agents_in(module: ModuleType) -> dict[str, Agent]:
    from afcore import Agent

    found: dict[str, Agent] = {}
    seen: set[int] = set()
    for key, value in vars(module).items():
        if isinstance(value, Agent) and id(value) not in seen:
            seen.add(id(value))
            found[key] = value
    return found


def _flows_in(module: ModuleType) -> dict[str, Flow]:
    """The module's flows that no other flow of it runs as a step."""
    from afcore.flows import Flow

    flows = {k: v for k, v in vars(module).items() if isinstance(v, Flow)}
    inner = {id(s) for f in flows.values() for s in f.runnables()}
    top: dict[str, Flow] = {}
    for key, flow in flows.items():
        if id(flow) not in inner and all(flow is not f for f in top.values()):
            top[key] = flow
    return top


def _pick(module: ModuleType, attr: str | None, shown: str) -> tuple[str, object]:
    if attr is None:
        flows = _flows_in(module)
        if len(flows) == 1:
            return next(iter(flows.items()))
        if flows:
            names = ", ".join(flows)
            raise LoadError(
                f"{shown} defines {len(flows)} flows ({names}); choose one, as "
                f"{shown}:{next(iter(flows))}"
            )
        agents = _agents_in(module)
        if len(agents) == 1:
            return next(iter(agents.items()))
        if not agents:
            raise LoadError(
                f"{shown} defines no Agent at module level; name one, as {shown}:NAME "
                "(an Agent, or a function that returns one)"
            )
        names = ", ".join(agents)
        raise LoadError(
            f"{shown} defines {len(agents)} agents ({names}); choose one, as "
            f"{shown}:{next(iter(agents))}"
        )
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = ", ".join(_agents_in(module))
            hint = f"; the agents it defines: {names}" if names else ""
            raise LoadError(f"{shown} has no attribute {attr!r}{hint}") from None
    return attr, obj


def _as_agent(obj: object, target: str) -> Agent | Flow:
    from afcore import Agent, AgentBuilder
    from afcore.flows import Flow

    if isinstance(obj, Agent | Flow):
        return obj
    if isinstance(obj, AgentBuilder):
        raise LoadError(f"{target} is an agent builder; finish it with .build()")
    if inspect.isclass(obj) or not callable(obj):
        raise LoadError(
            f"{target} is a {type(obj).__name__}, not an Agent or a function that returns one"
        )
    try:
        required = [
            p.name
            for p in inspect.signature(obj).parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
    except (TypeError, ValueError):
        required = []
    if required:
        raise LoadError(
            f"{target} takes arguments ({', '.join(required)}); af run calls it with none"
        )
    try:
        made = obj()
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        raise LoadError(f"{target}() raised {type(e).__name__}: {_first_line(e)}") from e
    if inspect.isawaitable(made):
        close = getattr(made, "close", None)
        if callable(close):
            close()  # never awaited: close it so Python does not warn
        raise LoadError(f"{target} is async; af run needs a plain function returning an Agent")
    if not isinstance(made, Agent | Flow):
        raise LoadError(f"{target}() returned a {type(made).__name__}, not an Agent or a flow")
    return made


def prepare(
    agent: Agent, source: str, out: Path | None = None, max_iterations: int | None = None
) -> Agent:
    """A copy of ``agent`` that records (the point of ``af run`` and ``af chat``, even for an
    agent built with ``record=False``), where ``out`` says, under the name it was loaded by."""
    import dataclasses

    from afcore import RecordingConfig

    runnable = copy.copy(agent)
    config = agent.recording or RecordingConfig()
    if out is not None:
        if out.exists() and not out.is_dir():
            raise CliError(f"--out {out} is a file; give a folder", EXIT_USAGE)
        config = dataclasses.replace(config, dir=out)
    runnable.recording = config
    runnable.source = source
    runnable.last_result = None
    if max_iterations is not None:
        runnable.max_iterations = max_iterations
    return runnable
