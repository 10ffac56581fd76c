"""The display helpers every command prints untrusted text through."""

from __future__ import annotations

from pathlib import Path

import pytest

from afcore.readmodel import args_text, line, safe


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text", "plain text"),
        ("keeps\nnewlines\tand tabs", "keeps\nnewlines\tand tabs"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("bell\x07 nul\x00 del\x7f", "bell\\x07 nul\\x00 del\\x7f"),
        ("carriage\rreturn", "carriage\\x0dreturn"),
        ("c1 csi \x9b2J", "c1 csi \\x9b2J"),
        ("bidi \u202eevil\u202c", "bidi \\u202eevil\\u202c"),
        ("isolate \u2066x\u2069", "isolate \\u2066x\\u2069"),
        ("[bold red]markup[/] stays", "[bold red]markup[/] stays"),
        ("unicode é 漢字 ✓", "unicode é 漢字 ✓"),
    ],
)
def test_safe_escapes_control_characters_visibly(raw: str, shown: str) -> None:
    assert safe(raw) == shown


def test_safe_leaves_no_control_character() -> None:
    everything = "".join(map(chr, range(0x2100)))
    for ch in safe(everything):
        code = ord(ch)
        assert ch in "\n\t" or not (code < 0x20 or 0x7F <= code <= 0x9F)


def test_line_keeps_short_text_and_flattens_newlines() -> None:
    assert line("short") == "short"
    assert line("two\nlines") == "two⏎lines"


def test_line_states_the_cut() -> None:
    text = "x" * 1234 + "y" * 1000
    cut = line(text, 100)
    assert len(cut) <= 100
    shown = cut.split("…")[0]
    assert shown == "x" * len(shown)
    assert cut.endswith(f"… ({len(text) - len(shown):,} more chars)")


def test_a_printable_value_is_cut_as_its_length_and_the_room_say() -> None:
    """The cut of a long printable value is kept by its length and the room (a big run's
    results come in a few lengths): any value of that length, in any room, is cut as
    counting it out says, whatever was cut before."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300, deadline=None)
    @given(
        st.lists(
            st.tuples(
                st.sampled_from([0, 30, 100, 4_990, 5_000, 19_999]) | st.integers(0, 20_000),
                st.sampled_from([-5, 24, 25, 56, 80, 200]) | st.integers(-5, 300),
                st.sampled_from("aé漢·"),
            ),
            min_size=1,
            max_size=8,
        )
    )
    def cuts(cases: list[tuple[int, int, str]]) -> None:
        for size, limit, ch in cases:
            text = ch * size
            room = max(limit, 24)
            if size <= room:
                assert line(text, limit) == text
                continue
            # Counted out: the room less the words that would say the whole length.
            kept = room - len(f"… ({size:,} more chars)")
            assert line(text, limit) == ch * kept + f"… ({size - kept:,} more chars)"

    cuts()


def test_a_head_cut_before_does_not_cut_a_whole_value_of_its_length() -> None:
    """A head of a longer value (``total``: a live run's view of a value it holds the head
    of) is cut by what it holds: a whole value of the same length and room, cut later, keeps
    what its room allows."""
    head = line("abc", 40, total=1_000)
    assert head == "abc… (997 more chars)"
    whole = line("x" * 1_000, 40)
    kept = 40 - len("… (1,000 more chars)")
    assert whole == "x" * kept + f"… ({1_000 - kept:,} more chars)"


def test_line_escapes_before_cutting_and_costs_little_on_huge_values() -> None:
    cut = line("\x1b" * 10_000_000, 60)
    assert "\x1b" not in cut and cut.startswith("\\x1b\\x1b")
    assert len(cut) <= 60
    shown = cut.count("\\x1b")
    assert cut.endswith(f"… ({10_000_000 - shown:,} more chars)")


def test_line_counts_what_escapes_pushed_out() -> None:
    text = "\x07" * 30  # 30 characters, 120 once escaped
    cut = line(text, 40)
    shown = cut.count("\\x07")
    assert len(cut) <= 40 and shown >= 1
    assert cut.endswith(f"({30 - shown} more chars)")


def test_args_text() -> None:
    assert args_text({"city": "Lisbon", "n": 2, "ok": True}) == 'city="Lisbon", n=2, ok=true'
    assert args_text({"s": "\x1b[2J"}) == 's="\\u001b[2J"'
    assert args_text({"long": "z" * 500}, 60).endswith("more chars)")


def test_cells_counts_as_rich_does() -> None:
    from rich.cells import cell_len

    from afcli._render import cells

    for text in ["plain", "a · b → c ← d ✓ ✗ ⏎ – … ─ ┈ ▸ ▾ ⇢", "日本語", "e\u0301", "tab\tx", ""]:
        assert cells(text) == cell_len(text), text
    # Sequences Rich measures whole: joined emoji, variation selectors, flags, skin tones.
    joined = ["👨\u200d👩\u200d👧 family", "❤\ufe0f ok", "🇵🇹 flag", "👍🏽 東京 😀", "\u200b\u2028x"]
    for text in joined:
        assert cells(text) == cell_len(text), text
    # Every character counted without Rich, one at a time and among wide ones.
    for code in range(0x20, 0x600):
        text = chr(code)
        assert cells(text) == cell_len(text), hex(code)
        assert cells(f"smörgåsbord {text} данные") == cell_len(f"smörgåsbord {text} данные")
        assert cells(f"東京 {text}") == cell_len(f"東京 {text}"), hex(code)
    for code in range(0x600, 0x30000, 5):  # wide, zero-width and combining ones added up
        text = f"東京 {chr(code)} à {chr(code + 2)}"
        assert cells(text) == cell_len(text), hex(code)


def test_wrapping_breaks_lines_where_rich_does() -> None:
    import random

    from rich.console import Console
    from rich.text import Text

    from afcli._render import Line, _split, _wrapped

    console = Console(width=80)
    rng = random.Random(7)
    words = ["a", "fold", "messages", "x" * 30, "  ", "·", "→", "seed#0", "-", "y" * 95]
    for _ in range(300):
        text = "".join(rng.choice(words) + rng.choice(["", " ", "  "]) for _ in range(30))
        room = rng.choice([20, 33, 58, 78])
        ours = [w.plain.rstrip() for w in _wrapped(console, Line(text), room)]
        theirs = [w.plain.rstrip() for w in Text(text).wrap(console, room)]
        assert ours == theirs, (text, room)
    styled = Line(("ab ", "red"), "cd ef", ("gh", "bold"), style="dim")
    assert [list(line.pieces) for line in _split(styled, [2, 6])] == [
        [("ab", "red")],
        [(" ", "red"), ("cd ", "")],
        [("ef", ""), ("gh", "bold")],
    ]


HOSTILE = "[bold]b[/] 東京タワー \x1b[31mred \u202eevil 👨\u200d👩\u200d👧 ok\ttab\nline ｗｉｄｅ "


def _hostile(value: object, n: list[int]) -> object:
    """``value`` with hostile text put into every other string of it."""
    if isinstance(value, str):
        n[0] += 1
        return value[:2] + HOSTILE * (n[0] % 3) + value[2:] if n[0] % 2 and " " in value else value
    if isinstance(value, list):
        return [_hostile(v, n) for v in value]
    if isinstance(value, dict):
        return {k: _hostile(v, n) for k, v in value.items()}
    return value


@pytest.mark.parametrize("width", [40, 80, 200])
def test_a_plain_run_prints_as_its_lines_pieces_would(
    width: int, tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without colour ``af show`` builds each line as its text and measures it once: the
    same bytes as when every line is a Line, on the samples and on hostile text."""
    from rich.console import Console

    from afcli import _render

    files = _samples_and_hostile_copies(tmp_path)
    fast = [_shown_plain(path, width) for path in files]
    made = _render.Printer.__init__

    def with_lines(self: _render.Printer, console: Console) -> None:
        made(self, console)
        self.line = _render.Line

    monkeypatch.setattr(_render.Printer, "__init__", with_lines)
    hostile_shown = "".join(fast[1::2])
    assert "東" in hostile_shown and "\\x1b[31m" in hostile_shown and "[bold]" in hostile_shown
    assert fast == [_shown_plain(path, width) for path in files]


_NAMES = ["search", "東京タワー", "a\nb", "x\u200dy", "👍🏽", "é" * 30, "[b]x", "\x1b[31m", "t\tb"]
_TAILS = ["short", "a" * 500, "東京" * 100, "line\nbreak " * 20, "", "\u202eevil" * 30, "é" * 90]


@pytest.mark.parametrize("width", [40, 80, 200])
def test_a_tool_results_line_measured_by_its_parts_is_the_line_measured_whole(
    width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without colour a tool result's line is written from a head measured once for its tool
    and status: the same bytes as when each line is measured whole (the head a newline, a
    joiner or wide characters make is measured with the rest), whatever the name, the
    status, the time and the result."""
    import io

    from rich.console import Console

    from afcli._render import Printer
    from afcli.commands import show
    from afcore.readmodel import CallSummary, ToolResult

    statuses = [("ok", "", 3.25), ("error", "error · absent", 12345.6), ("ok", "ok", 0.04)]
    results = [
        ToolResult(name, f"c{i}", status, ms, tail, False, None, None, said)
        for i, (name, tail) in enumerate((name, tail) for name in _NAMES for tail in _TAILS)
        for status, said, ms in [statuses[i % 3]]
    ]
    call = CallSummary(
        call=1,
        iteration=1,
        rsid="call-llm#1",
        model="m",
        line=1,
        kind="agent",
        fold=None,
        segments=1,
        chars=10,
        messages=1,
        window=[[1, 1]],
        tools=1,
        tools_added=[],
        tools_removed=[],
        injections=None,
        attempt=None,
        results=results,
    )

    def shown() -> str:
        buffer = io.StringIO()
        out = Printer(Console(file=buffer, width=width, color_system=None, markup=False))
        show._print_call_line(out, call)
        out.flush()
        return buffer.getvalue()

    show._RESULT_HEADS.clear()
    fast = shown()
    assert fast.count("  ← ") >= len(results)
    # Every head measured with the rest of its line, as print_fit() measures a line.
    monkeypatch.setattr(
        show, "_result_head", lambda name, status: (f"  ← {show.safe(name)} {status} · ", -1)
    )
    show._RESULT_HEADS.clear()
    assert shown() == fast
    show._RESULT_HEADS.clear()


@pytest.mark.parametrize("width", [24, 40, 80])
def test_a_printer_without_colour_wraps_as_the_console_does(width: int) -> None:
    """A long line wrapped by a Printer without colour (cut from its text, each piece written
    as it is) is what the console writes for the same text."""
    import io
    import random

    from rich.console import Console

    from afcli._render import Printer, print_hanging

    def console(buffer: io.StringIO) -> Console:
        return Console(file=buffer, width=width, color_system=None, markup=False)

    rng = random.Random(width)
    words = ["fold", "9962", "at", "iteration", "–", "(59768–59773)", "->", "x" * 50, "a"]
    for _ in range(200):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 14)))
        indent, more = rng.choice([(0, 2), (2, 2), (0, 5), (2, 0)])
        ours, theirs = io.StringIO(), io.StringIO()
        out = Printer(console(ours))
        print_hanging(out, text, indent, more)
        out.flush()
        print_hanging(console(theirs), text, indent, more)
        assert ours.getvalue() == theirs.getvalue(), (text, indent, more)


def test_a_time_said_before_is_said_as_formatting_it_says() -> None:
    """:func:`ms_text` keeps the times it said: each time, said again or first, is said as
    formatting it says (-0.0 and 0.0, equal as keys, are said apart)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from afcore.readmodel import ms_text

    def said(ms: float) -> str:
        if -999.9 < ms < 999.9:
            return f"{ms:.1f} ms"
        return f"{ms:,.1f} ms" if ms < 10_000 else f"{ms / 1000:,.1f} s"

    times = st.floats(allow_nan=True) | st.sampled_from([0.0, -0.0, 0.04, -0.04, 999.9, 1e4])

    @settings(max_examples=300, deadline=None)
    @given(st.lists(times | st.integers(-(10**6), 10**6), min_size=1, max_size=12))
    def check(values: list[float]) -> None:
        for ms in [*values, *reversed(values)]:
            assert ms_text(ms) == said(ms), ms

    check()
    assert [ms_text(0.0), ms_text(-0.0), ms_text(0.0)] == ["0.0 ms", "-0.0 ms", "0.0 ms"]
    assert ms_text(None) == ""


def test_arguments_are_written_as_json_text_writes_each_value() -> None:
    """A call's arguments encoded at once are each value as :func:`json_text` writes it,
    whatever the values (numbers beyond 64 bits, lone surrogates, escapes)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from afcore.readmodel import json_text

    values = st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats()
        | st.text(st.characters(codec=None, min_codepoint=0), max_size=12),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=6,
    )

    @settings(max_examples=400, deadline=None)
    @given(st.dictionaries(st.text(max_size=6), values, max_size=4), st.integers(0, 120))
    def check(args: dict[str, object], limit: int) -> None:
        text = ", ".join(f"{k}={json_text(v)}" for k, v in args.items())
        assert args_text(args, limit) == line(text, limit)

    check()
    assert args_text({"n": 2**70, "s": "\ud800"}) == f"n={2**70}, s='\\ud800'"


@pytest.mark.parametrize("width", [30, 40, 80, 200])
def test_a_cut_line_is_what_the_console_writes_for_it(width: int) -> None:
    """Without colour :meth:`Printer.print_cut` writes a head and as much of a value as fits
    (an ASCII head taken a cell a character untested): what the console writes for
    ``fit()``'s line, whatever the value."""
    import io

    from hypothesis import given, settings
    from hypothesis import strategies as st
    from rich.console import Console
    from rich.text import Text

    from afcli._render import Printer, cells, fit

    pieces = st.sampled_from(["a", "word ", "é", "東京", "\n", "\t", "\x1b[2J", "…", "👍🏽", "ｗ"])
    tails = st.lists(pieces, max_size=60).map("".join) | st.text(max_size=90)

    @settings(max_examples=300, deadline=None)
    @given(st.sampled_from(["  ← t ok · 1.0 ms · ", "  says ", "東京 ", "x" * 70]), tails)
    def check(head: str, tail: str) -> None:
        ours, theirs = io.StringIO(), io.StringIO()
        out = Printer(Console(file=ours, width=width, color_system=None, markup=False))
        out.print_cut(head, cells(head), tail, width)
        out.flush()
        console = Console(file=theirs, width=width, color_system=None, markup=False)
        console.print(Text(fit(head, tail, width)))
        assert ours.getvalue() == theirs.getvalue(), (head, tail)

    check()


@pytest.mark.parametrize("width", [24, 40, 80])
def test_a_short_line_hung_without_colour_is_what_the_console_writes(width: int) -> None:
    """A line of text hung by a Printer without colour, written as it is when it fits, is
    what the console writes for it: wide characters, trailing spaces, newlines (a tab is
    written as it is, where the console expands it: as before)."""
    import io

    from hypothesis import given, settings
    from hypothesis import strategies as st
    from rich.console import Console

    from afcli._render import Printer, print_hanging

    words = st.sampled_from(["fold", "–", "東京", "x" * 12, " ", "\n", "👍🏽", "é", "a\u0301"])

    @settings(max_examples=300, deadline=None)
    @given(st.lists(words, max_size=14).map("".join), st.sampled_from([(0, 2), (2, 2), (0, 5)]))
    def check(text: str, hang: tuple[int, int]) -> None:
        ours, theirs = io.StringIO(), io.StringIO()
        out = Printer(Console(file=ours, width=width, color_system=None, markup=False))
        print_hanging(out, text, *hang)
        out.flush()
        console = Console(file=theirs, width=width, color_system=None, markup=False)
        print_hanging(console, text, *hang)
        assert ours.getvalue() == theirs.getvalue(), (text, hang)

    check()


def test_a_calls_injections_line_kept_is_the_line_made_again() -> None:
    """Without colour the overview keeps a call's injections line by what it says: each
    line, kept or made, is the one :func:`_decisions_text` makes for its call at its width
    (ids that say other words as text, 1 and 1.0 and true, are not taken for each other)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from afcli._render import _joined
    from afcli.commands import show
    from afcore.readmodel import Decision, Decisions

    ids = st.sampled_from(["cite", "step", "東京", "a\nb", "[b]x", "\x1b[2J", "x" * 90])
    odd = st.sampled_from([1, 1.0, True, None])
    decided = st.builds(
        lambda fired, skipped: Decisions(
            len(fired) + len(skipped),
            [Decision(i, None, "always", True, "always") for i in fired],
            [Decision(i, None, "rule", False, "rule returned false") for i in skipped],
        ),
        st.lists(ids | odd, max_size=12),
        st.lists(ids, max_size=2),
    )

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(decided, st.sampled_from([60, 80, 200])), min_size=1, max_size=8))
    def check(calls: list[tuple[Decisions, int]]) -> None:
        for inj, width in [*calls, *calls]:
            made = show._decisions_text(inj, max(60, width // 2), cap=8, make=_joined)
            assert show._call_decisions(inj, width, _joined) == made

    show._DECIDED.clear()
    check()
    show._DECIDED.clear()


@pytest.mark.parametrize("width", [40, 80, 200])
def test_a_plain_run_says_what_its_coloured_lines_say(
    width: int, tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without colour ``af show`` writes a call's lines as their text, each made where its
    coloured line is made of pieces: the same words, on the samples and on hostile text
    (the coloured lines written by a console without colour)."""
    from rich.console import Console

    from afcli import _render

    files = _samples_and_hostile_copies(tmp_path)
    plain = [_shown_plain(path, width) for path in files]
    made = _render.Printer.__init__

    def coloured(self: _render.Printer, console: Console) -> None:
        made(self, console)
        self.plain = False  # each line made of pieces, as with colour
        self.line = _render.Line

    monkeypatch.setattr(_render.Printer, "__init__", coloured)
    assert "東" in "".join(plain[1::2])
    assert plain == [_shown_plain(path, width) for path in files]


def _hostile_copy(sample: object) -> str:
    import json
    from pathlib import Path

    n = [0]
    lines = []
    for raw in Path(str(sample)).read_text().splitlines():
        record = json.loads(raw)
        if record.get("t") == "blob":
            record["value"] = _hostile(record["value"], n)
        for write in record.get("writes") or []:
            if "value" in write:
                write["value"] = _hostile(write["value"], n)
        lines.append(json.dumps(record, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def _samples_and_hostile_copies(tmp_path: object) -> list[Path]:
    """Each sample recording, and a copy of it holding hostile text (see :func:`_hostile`)."""
    samples = sorted((Path(__file__).resolve().parents[2] / "recordings").glob("sample-*.jsonl"))
    files = []
    for sample in samples:
        hostile = Path(str(tmp_path)) / f"hostile-{sample.name}"
        hostile.write_text(_hostile_copy(sample))
        files += [sample, hostile]
    return files


def _shown_plain(path: Path, width: int) -> str:
    """``af show``'s output for ``path`` on a console of ``width`` columns without colour."""
    import io

    from rich.console import Console

    from afcli.commands.show import _print_run
    from afcore.recording import open_recording

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, markup=False)
    with open_recording(path, index=False) as rec:
        _print_run(console, rec)
    return buffer.getvalue()
