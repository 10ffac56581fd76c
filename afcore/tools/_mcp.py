"""MCP, both ways, on the official ``mcp`` SDK: an MCP server's tools as af tools
(``mcp_tools``), and af tools served to any MCP host (``mcp_serve``).

An agent is built once and run many times, from any thread and on any event loop (each
thread's ``run()`` on that thread's loop, an ``arun()`` on the caller's), while an MCP
session lives on the loop that opened it. So each server's session is owned by
one loop on a thread of its own, opened when ``mcp_tools()`` lists the tools and kept
across runs (starting a server per run costs a process start and a handshake each time).
A tool call from any run's loop is handed to that thread and awaited. A server that stops
turns the calls in flight into error results, and is started again at the next call.
``close()`` (or leaving a ``with`` block) stops it; whatever is still open when the
interpreter exits is stopped then.
"""

from __future__ import annotations

import asyncio
import atexit
import re
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, overload

import orjson

from afcore._version import __version__
from afcore.errors import McpError, RefusedError, UsageError
from afcore.tools._ceiling import ceiling_refusal, over_ceiling
from afcore.tools._envelope import read_envelope
from afcore.tools._notes import REFUSAL_PREFIX
from afcore.tools._reading import read_result
from afcore.tools._tool import Tool, ToolContext, define_tool
from afcore.tools._validation import correction, validate_args

if TYPE_CHECKING:
    import mcp
    import mcp.types
    from mcp.server import Server

__all__ = ["McpTools", "mcp_serve", "mcp_server", "mcp_tools"]

CALL_TIMEOUT = 120.0
"""Seconds a call may take before its result is an error (None: wait for ever)."""
CONNECT_TIMEOUT = 30.0
"""Seconds a server may take to start and answer the handshake."""
_STOP_TIMEOUT = 15.0
_LIST_PAGES = 100


# -- an MCP server's tools as af tools -----------------------------------------------------


class McpTools(Sequence[Tool]):
    """The tools of one MCP server, as af tools: register them with ``.tools(...)``.

    The session stays open across runs until :meth:`close` (or the end of a ``with``
    block, or of the interpreter). ``server`` is the server's name, which every tool's
    ``source`` carries as ``mcp:<server>``.
    """

    def __init__(self, link: _Link, tools: Sequence[Tool]) -> None:
        self._link = link
        self._tools = tuple(tools)

    @property
    def server(self) -> str:
        """The server's name: as given, else as the server calls itself."""
        return self._link.server

    @property
    def closed(self) -> bool:
        return self._link.closed

    def close(self) -> None:
        """Stop the session (and a stdio server's process). Calls made after it are error
        results. Safe to call twice."""
        self._link.close()

    def __enter__(self) -> McpTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @overload
    def __getitem__(self, index: int) -> Tool: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Tool]: ...
    def __getitem__(self, index: int | slice) -> Tool | Sequence[Tool]:
        return self._tools[index]

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools)

    def __repr__(self) -> str:
        names = ", ".join(t.name for t in self._tools)
        state = "closed" if self.closed else "open"
        return f"McpTools(server={self.server!r}, {state}, tools=[{names}])"


def mcp_tools(
    *,
    command: Sequence[str] | None = None,
    url: str | None = None,
    name: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stderr: IO[Any] | int | None = None,
    headers: Mapping[str, str] | None = None,
    include: Iterable[str] | None = None,
    prefix: str = "",
    timeout: float | None = CALL_TIMEOUT,
    connect_timeout: float = CONNECT_TIMEOUT,
) -> McpTools:
    """Connect to an MCP server and return its tools as af tools.

    ``command``: the program and its arguments, run as a subprocess spoken to over stdio
    (``env`` is added to the few variables the SDK passes on: PATH, HOME, ...; ``cwd``
    where it runs; ``stderr`` where its log goes, this process's stderr by default).
    ``url``: a streamable HTTP endpoint (``headers`` sent with every request). Exactly one
    of the two. ``name`` names the server in each tool's ``source`` (default: the name the
    server gives). ``include`` takes only the tools named; ``prefix`` is put before each
    tool's name (to keep two servers' tools apart). ``timeout``: seconds a call may take.

    Blocks while the server starts and lists its tools; an error names the server.
    """
    if (command is None) == (url is None):
        raise UsageError("mcp_tools(...) takes command=[program, *args] or url=..., one of them")
    if command is not None:
        if isinstance(command, str) or not isinstance(command, Sequence) or not command:
            raise UsageError(
                "mcp_tools(command=...) takes the program and its arguments as a list, "
                f"such as ['python', 'server.py'], got {command!r}"
            )
        if not all(isinstance(part, str) and part for part in command):
            raise UsageError(f"mcp_tools(command=...) takes strings, got {command!r}")
        label = name or Path(command[0]).name
        opener = _stdio_opener(list(command), env, cwd, stderr)
    else:
        if not isinstance(url, str) or not re.match(r"^https?://", url):
            raise UsageError(f"mcp_tools(url=...) takes an http(s) URL, got {url!r}")
        label = name or url
        opener = _http_opener(url, headers)
    if timeout is not None and not timeout > 0:
        raise UsageError(f"mcp_tools(timeout=...) takes seconds > 0 or None, got {timeout!r}")
    if name is not None and (not isinstance(name, str) or not name):
        raise UsageError("mcp_tools(name=...) takes a non-empty string")
    link = _Link(
        label, opener, remote=url is not None, timeout=timeout, connect_timeout=connect_timeout
    )
    try:
        listed, server_name = link.connect()
        if name is None and server_name:
            link.server = server_name
        chosen = _choose(listed, include, link.server)
        tools = [_as_af_tool(link, t, prefix) for t in chosen]
    except BaseException:
        link.close()
        raise
    return McpTools(link, tools)


def _choose(
    listed: Sequence[mcp.types.Tool], include: Iterable[str] | None, server: str
) -> list[mcp.types.Tool]:
    if include is None:
        return list(listed)
    if isinstance(include, str):
        raise UsageError("mcp_tools(include=...) takes a list of tool names")
    wanted = list(include)
    by_name = {t.name: t for t in listed}
    missing = [n for n in wanted if n not in by_name]
    if missing:
        raise UsageError(
            f"mcp_tools(include=...): the MCP server {server!r} has no tool "
            f"{', '.join(repr(n) for n in missing)}; it has {', '.join(by_name) or 'none'}"
        )
    return [by_name[n] for n in wanted]


def _as_af_tool(link: _Link, listed: mcp.types.Tool, prefix: str) -> Tool:
    remote = listed.name

    async def execute(args: dict[str, Any], ctx: ToolContext) -> Any:
        return await link.call(remote, args, ctx.progress if ctx is not None else None)

    try:
        return define_tool(
            f"{prefix}{remote}",
            listed.description or "",
            dict(listed.input_schema),
            execute,
            source=f"mcp:{link.server}",
        )
    except UsageError as e:
        raise UsageError(
            f"the MCP server {link.server!r} lists a tool af cannot take: {e}"
        ) from None


@dataclass
class _Session:
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    client: Any = None
    error: BaseException | None = None
    pending: set[asyncio.Future[Any]] = field(default_factory=set)
    """Calls in flight: cancelled when the session ends, so none waits for ever."""


_Opener = Callable[[], AbstractAsyncContextManager[Any]]


class _Link:
    """One server's session, owned by an event loop on a thread of its own."""

    def __init__(
        self,
        label: str,
        opener: _Opener,
        *,
        remote: bool,
        timeout: float | None,
        connect_timeout: float,
    ) -> None:
        self._remote = remote  # a server at a URL is reached; one run by a command, started
        self.closed = False
        self._opener = opener
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._session: _Session | None = None
        self._lock: asyncio.Lock | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.server = label
        self._thread.start()
        atexit.register(self.close)

    @property
    def server(self) -> str:
        return self._server

    @server.setter
    def server(self, name: str) -> None:
        self._server = name
        self._thread.name = f"af-mcp:{name}"

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        finally:
            self._loop.close()

    # -- from other threads and loops

    def connect(self) -> tuple[list[mcp.types.Tool], str | None]:
        """Start the session and list the tools (blocking)."""
        future = asyncio.run_coroutine_threadsafe(self._first(), self._loop)
        return future.result()

    async def call(
        self, name: str, args: dict[str, Any], progress: Callable[[Any], None] | None = None
    ) -> Any:
        """Call a tool from any event loop; what the model reads, or an error to raise.
        The server's progress notifications go to ``progress`` (the tool's ctx.progress)."""
        if self.closed:
            raise McpError(
                f"the tools of the MCP server {self.server!r} were closed", server=self.server
            )
        future = asyncio.run_coroutine_threadsafe(self._call(name, args, progress), self._loop)
        result = await asyncio.wrap_future(future)
        return _served(result, self.server)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        atexit.unregister(self.close)
        if threading.current_thread() is self._thread:
            raise UsageError("close() was called from the MCP session's own thread")
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(_STOP_TIMEOUT + 5)
        except Exception:
            pass  # the server is going away either way; the loop below stops regardless
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_STOP_TIMEOUT)

    # -- on the session's loop

    async def _first(self) -> tuple[list[mcp.types.Tool], str | None]:
        session = await self._live()
        client = session.client
        tools: list[mcp.types.Tool] = []
        cursor: str | None = None
        try:
            async with asyncio.timeout(self._connect_timeout):
                for _ in range(_LIST_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except TimeoutError:
            raise McpError(
                f"the MCP server {self.server!r} did not list its tools within "
                f"{self._connect_timeout:g} s",
                server=self.server,
            ) from None
        except Exception as e:
            raise McpError(
                f"the MCP server {self.server!r} could not list its tools: {_say(e)}",
                server=self.server,
            ) from e
        info = getattr(client, "server_info", None)
        return tools, getattr(info, "name", None) or None

    async def _live(self) -> _Session:
        """The open session, started (again) when there is none."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._session is not None and not self._session.ended.is_set():
                return self._session
            session = _Session()
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            owner = asyncio.ensure_future(self._own(session, ready))
            try:
                async with asyncio.timeout(self._connect_timeout):
                    await asyncio.shield(ready)
            except TimeoutError:
                session.stop.set()
                owner.cancel()
                await asyncio.gather(owner, return_exceptions=True)
                raise McpError(
                    f"the MCP server {self.server!r} did not answer the handshake within "
                    f"{self._connect_timeout:g} s",
                    server=self.server,
                ) from None
            except Exception as e:
                verb = "reached" if self._remote else "started"
                raise McpError(
                    f"the MCP server {self.server!r} could not be {verb}: {_say(e)}",
                    server=self.server,
                ) from None
            self._session = session
            return session

    async def _own(self, session: _Session, ready: asyncio.Future[None]) -> None:
        """Hold the session open until asked to stop, or until it breaks; one task enters
        and leaves the SDK's context, as its task groups require."""
        try:
            async with self._opener() as client:
                session.client = client
                ready.set_result(None)
                await session.stop.wait()
        except Exception as e:
            session.error = e
            if not ready.done():
                ready.set_exception(e)
        finally:
            session.ended.set()
            for call in list(session.pending):
                call.cancel()

    async def _call(
        self, name: str, args: dict[str, Any], progress: Callable[[Any], None] | None
    ) -> mcp.types.CallToolResult:
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            if progress is not None:
                # MCP's own fields, as the server sent them: `message` is what a person reads.
                payload: dict[str, Any] = {"progress": done}
                if total is not None:
                    payload["total"] = total
                if message:
                    payload["message"] = message
                progress(payload)

        session = self._session
        if session is None or session.ended.is_set():
            session = await self._live()
        call = asyncio.ensure_future(
            session.client.call_tool(
                name, args, progress_callback=on_progress if progress else None
            )
        )
        session.pending.add(call)
        call.add_done_callback(session.pending.discard)
        try:
            result: mcp.types.CallToolResult = await asyncio.wait_for(call, self._timeout)
            return result
        except TimeoutError:
            raise McpError(
                f"the MCP server {self.server!r} did not answer within {self._timeout:g} s",
                server=self.server,
            ) from None
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if call.cancelled() and session.ended.is_set() and me and not me.cancelling():
                raise self._stopped(session, session.error) from None
            raise
        except MCPError as e:
            if e.code == CONNECTION_CLOSED:
                await self._drop(session)
                raise self._stopped(session, None) from None
            raise McpError(
                f"the MCP server {self.server!r} refused the call: {e.message} (code {e.code})",
                server=self.server,
            ) from None
        except Exception as e:
            if session.ended.is_set():
                raise self._stopped(session, session.error or e) from None
            raise McpError(
                f"the call to {name!r} on the MCP server {self.server!r} failed: {_say(e)}",
                server=self.server,
            ) from None

    def _stopped(self, session: _Session, cause: BaseException | None) -> McpError:
        why = _say(cause) if cause is not None else "its connection closed"
        again = "connected to again" if self._remote else "started again"
        return McpError(
            f"the MCP server {self.server!r} stopped during the call ({why}); no result "
            f"came back, and the server is {again} at the next call",
            server=self.server,
        )

    async def _drop(self, session: _Session) -> None:
        """Wind down a session that broke, so the next call starts a fresh one."""
        session.stop.set()
        try:
            async with asyncio.timeout(_STOP_TIMEOUT):
                await session.ended.wait()
        except TimeoutError:
            pass

    async def _shutdown(self) -> None:
        if self._session is not None:
            await self._drop(self._session)
        current = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not current]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)


def _stdio_opener(
    command: list[str],
    env: Mapping[str, str] | None,
    cwd: str | Path | None,
    stderr: IO[Any] | int | None,
) -> _Opener:
    def open_client() -> AbstractAsyncContextManager[Any]:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.types import Implementation

        params = StdioServerParameters(
            command=command[0], args=command[1:], env=dict(env or {}), cwd=cwd
        )
        log: Any = stderr if stderr is not None else _stderr()
        return Client(
            stdio_client(params, errlog=log),
            client_info=Implementation(name="af", version=__version__),
        )

    return open_client


def _http_opener(url: str, headers: Mapping[str, str] | None) -> _Opener:
    @asynccontextmanager
    async def open_client() -> AsyncIterator[Any]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.types import Implementation

        # The SDK's own defaults: a response stream may stay open for minutes.
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with httpx2.AsyncClient(headers=dict(headers or {}), timeout=timeout) as http:
            async with Client(
                streamable_http_client(url, http_client=http),
                client_info=Implementation(name="af", version=__version__),
            ) as client:
                yield client

    return open_client


def _stderr() -> Any:
    """This process's stderr for a server's log, when it is a real file (it is not inside
    some hosts); else nowhere."""
    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):
        import subprocess

        return subprocess.DEVNULL


def _say(e: BaseException | None) -> str:
    """One line for an exception, looking inside the groups the SDK's task groups raise."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    if e is None:
        return "no reason given"
    text = str(e) or type(e).__name__
    return f"{type(e).__name__}: {text}"[:300]


_REFUSAL = re.compile(rf"^{re.escape(REFUSAL_PREFIX)}(.*) \(field: ([^()]*)\)$", re.DOTALL)


def _served(result: mcp.types.CallToolResult, server: str) -> Any:
    """What the model reads of an MCP result: its text, except that a structured result in
    one of af's reserved shapes stays data, so its limits travel; an error is raised."""
    structured = result.structured_content
    texts = [_block_text(block) for block in result.content]
    text = "\n".join(texts)
    if result.is_error:
        refused = _REFUSAL.match(text)
        if refused:
            raise RefusedError(refused.group(1), field=refused.group(2))
        raise McpError(text or "the tool reported an error and said nothing more", server=server)
    if isinstance(structured, dict) and (
        read_envelope(structured) is not None or read_result(structured).limits
    ):
        return structured
    if not texts and structured is not None:
        return structured
    return text


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "?")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = len(block.data) * 3 // 4
        return f"[{kind} content: {block.mime_type}, about {size} bytes, not shown]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return text
        mime = getattr(resource, "mime_type", None) or "binary data"
        return f"[resource {resource.uri}: {mime}, not shown]"
    if kind == "resource_link":
        return f"[resource link: {block.uri}]"
    return f"[{kind} content, not shown]"


# -- af tools served to MCP hosts -----------------------------------------------------------


def mcp_server(tools: Iterable[Tool], *, name: str = "af") -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) that serves ``tools``: embed it
    (``.streamable_http_app()`` is an ASGI app) or run it with :func:`mcp_serve`.

    Arguments are checked against each tool's schema before it runs (a rejected call is
    an error result saying what to fix), a refusal is served as it is (``refused: ...``),
    and a result over the tool's ceiling is served as the ceiling's refusal. A result that
    is a JSON object is also served as structured content, so an af client keeps its
    limits as data.
    """
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError
    from mcp.types import (
        INVALID_PARAMS,
        CallToolRequestParams,
        CallToolResult,
        ListToolsResult,
        PaginatedRequestParams,
        TextContent,
    )
    from mcp.types import Tool as McpTool

    by_name: dict[str, Tool] = {}
    for t in tools:
        if not isinstance(t, Tool):
            raise UsageError(
                f"mcp_server(...) serves tools made by define_tool(...), got {type(t).__name__}"
            )
        if t.name in by_name:
            raise UsageError(f"mcp_server(...): two tools are named {t.name!r}")
        by_name[t.name] = t
    listing = [
        McpTool(name=t.name, description=t.description, input_schema=dict(t.input_schema))
        for t in by_name.values()
    ]
    state: dict[str, Any] = {}

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=listing)

    def error(text: str) -> CallToolResult:
        return CallToolResult(content=[TextContent(text=text)], is_error=True)

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            raise MCPError(
                INVALID_PARAMS,
                f"there is no tool named {params.name!r}; this server has "
                f"{', '.join(by_name) or 'none'}",
            )
        args = dict(params.arguments or {})
        problems = validate_args(tool, args)
        if problems:
            return error(correction(tool, problems))
        tool_ctx = ToolContext(
            run_id="mcp",
            iteration=0,
            call_id=str(getattr(ctx, "request_id", "") or ""),
            tool=tool.name,
            state=state,
        )
        try:
            value = await _run(tool, args, tool_ctx)
        except RefusedError as e:
            return error(str(e))
        except Exception as e:
            return error(f"The tool {tool.name} failed: {type(e).__name__}: {e}")
        text = _text_of(value)
        if over_ceiling(text, tool.result_ceiling):
            assert tool.result_ceiling is not None
            return error(ceiling_refusal(tool.name, len(text), tool.result_ceiling))
        structured = orjson.loads(text) if isinstance(value, Mapping) else None
        return CallToolResult(content=[TextContent(text=text)], structured_content=structured)

    return Server(
        name,
        version=__version__,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=lambda n: by_name[n].input_schema if n in by_name else None,
    )


def mcp_serve(
    tools: Iterable[Tool],
    *,
    name: str = "af",
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
) -> None:
    """Serve ``tools`` to MCP hosts until stopped: over stdio (a host runs this program),
    or over streamable HTTP at ``http://host:port/path``. Blocks."""
    server = mcp_server(tools, name=name)
    if transport == "stdio":
        import anyio
        from mcp.server.stdio import stdio_server

        async def serve_stdio() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve_stdio)
    elif transport == "http":
        import uvicorn

        app = server.streamable_http_app(streamable_http_path=path, host=host)
        print(f"serving {name} over MCP at http://{host}:{port}{path}", file=sys.stderr)
        uvicorn.run(app, host=host, port=port, log_level="warning")
    else:
        raise UsageError(f"mcp_serve(transport=...) is 'stdio' or 'http', got {transport!r}")


async def _run(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Any:
    if tool.is_async:
        return await tool.execute(args, ctx)
    value = await asyncio.to_thread(tool.execute, args, ctx)
    if asyncio.iscoroutine(value):
        value = await value
    return value


def _text_of(value: Any) -> str:
    """A result as text, as the agent loop serves it: a string as it is, else JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return orjson.dumps(value, default=_jsonable, option=orjson.OPT_NON_STR_KEYS).decode()


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)
