"""research-demo: a long, tool-heavy research run that outgrows its window, offline, for
`af run --demo compaction`.

An analyst agent answers a sourcing question from a small document library: it searches,
reads every report it finds (long ones), works out a pack's cost per supplier and
recommends one. Every report it reads makes the next call bigger, so the agent keeps its
live window in budget with a window strategy:

- ``build_agent()`` (``strategy="summarize"``): ``.compaction(...)``, i.e. summarize_oldest.
  Over the threshold, the oldest turns are folded into one summary written by a scripted
  summarizer, which keeps every searched query, document read, figure and cost as a bullet
  (and carries the bullets of an earlier summary it folds). The threshold counts tokens,
  so the model is a mock that reports its estimates as authoritative usage. It keeps no
  recent turn beyond those that refuse to leave: the user's request, the newest tool
  result, and the reply whose tool calls have not run yet (a strategy visits after a reply
  that asks for tools, before they run) all stay, and each fold records why.
- ``build_agent(strategy="sliding")``: sliding_window(keep_recent_turns=2), which drops old
  turns at every step with no summary. What the agent learned survives in a *notebook*: the
  tools file each finding in the run's state, and a fact injection puts the notebook in the
  system prompt at every call.

The model and the summarizer are scripted, every reply computed from the request alone:
the model learns what it has done from the tool results in its window, the summaries, and
the notebook, so it carries on after a fold exactly as it would without one. Nothing is
random and nothing reads a clock: two runs write the same recording apart from ids and
timings.

With the default message the run goes: a search for the suppliers' audits and a read of
each; a search for the 2027 price quotes and a read; a search for field returns and a
read; a search for the pack design and a read; the cost of a pack with each supplier (three
calls in one reply); the recommendation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from afcore.agent import Agent
from afcore.injections import RunView
from afcore.messages import Request, ToolResultMessage, UserMessage
from afcore.providers import mock
from afcore.recording import RecordingConfig
from afcore.tools import Tool, ToolContext, define_tool
from afcore.window import sliding_window

__all__ = ["DEFAULT_MESSAGE", "NAME", "Strategy", "build_agent", "build_sliding_agent"]

NAME = "research-demo"

Strategy = Literal["summarize", "sliding"]

DEFAULT_MESSAGE = (
    "We need a battery cell supplier for the 2027 e-bike line: Kestrel Cells, Northwind "
    "Energy or Halden Power. Check their audits, their 2027 prices and their field returns, "
    "work out what one pack would cost with each, and recommend one."
)

SYSTEM = (
    "You are research-demo, an analyst who answers from the company's document library. "
    "Search the library, read what you find, work out costs with pack_cost rather than in "
    "your head, and cite the id of every document you rely on."
)

THRESHOLD_TOKENS = 1_200
"""summarize_oldest folds when the last call's counted input tokens exceed this."""

# -- the library ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Document:
    id: str
    title: str
    date: str
    tags: frozenset[str]
    findings: str
    """The key findings in one sentence: what a reader (or a summary) keeps."""
    text: str


def _doc(id: str, title: str, date: str, tags: str, findings: str, *paragraphs: str) -> _Document:
    return _Document(id, title, date, frozenset(tags.split()), findings, "\n\n".join(paragraphs))


_LIBRARY: tuple[_Document, ...] = (
    _doc(
        "RPT-101",
        "Supplier audit: Kestrel Cells",
        "2026-02-11",
        "battery cell supplier audit kestrel quality",
        "Kestrel Cells passed with 0 major findings open; defect rate 38 ppm; 1,100 cycles "
        "to 80% capacity; lead time 10 weeks.",
        "Scope: an on-site audit of the Kestrel Cells plant in Brno, 9 to 11 February 2026, "
        "covering incoming material control, electrode coating, formation and ageing, and "
        "end-of-line testing of the KC-21700-50 cell (5.0 Ah, 21700 format).",
        "Quality: the outgoing defect rate over the last four quarters was 38 ppm, inside "
        "our limit of 50 ppm. Capacity binning is automated and every lot keeps its "
        "formation curves for five years. Two minor findings (a torque wrench out of "
        "calibration, a missing signature on a deviation form) were closed during the visit.",
        "Durability: the cell kept 80% of its capacity after 1,100 full cycles at 25 °C in "
        "our own lab test, and passed nail penetration and external short-circuit tests with "
        "no fire.",
        "Supply: a second coating line starts in June 2026; quoted lead time 10 weeks.",
    ),
    _doc(
        "RPT-102",
        "Supplier audit: Northwind Energy",
        "2026-03-04",
        "battery cell supplier audit northwind quality",
        "Northwind Energy passed conditionally with 2 major findings open; defect rate 61 "
        "ppm; 1,000 cycles to 80% capacity; lead time 14 weeks.",
        "Scope: an on-site audit of the Northwind Energy plant in Gdańsk, 2 to 4 March "
        "2026, covering the same processes as our other cell audits, for the NW-21700-48 "
        "cell (4.8 Ah, 21700 format).",
        "Quality: the outgoing defect rate was 61 ppm, above our limit of 50 ppm. Two major "
        "findings are open: thermal-runaway test records are incomplete for two production "
        "lots, and the formation room's humidity was logged out of range on six days in "
        "January without a deviation report. Northwind has promised corrective actions by "
        "the end of June 2026; a follow-up audit is needed to close them.",
        "Durability: 80% of capacity after 1,000 full cycles at 25 °C; safety tests passed.",
        "Supply: the plant runs at 90% of its capacity; quoted lead time 14 weeks.",
    ),
    _doc(
        "RPT-103",
        "Supplier audit: Halden Power",
        "2026-01-20",
        "battery cell supplier audit halden quality",
        "Halden Power passed with 0 major findings open; defect rate 22 ppm; 1,300 cycles "
        "to 80% capacity; lead time 8 weeks.",
        "Scope: an on-site audit of the Halden Power plant in Halden, 18 to 20 January "
        "2026, for the HP-21700-50 cell (5.0 Ah, 21700 format), the premium cell of their "
        "range.",
        "Quality: the outgoing defect rate was 22 ppm, the lowest of the suppliers audited "
        "this year. No major finding; one minor finding (labels of a quarantine rack) was "
        "closed during the visit. Traceability runs from the slurry batch to the cell's "
        "serial number.",
        "Durability: 80% of capacity after 1,300 full cycles at 25 °C; safety tests passed "
        "with margin.",
        "Supply: the plant is new and has capacity to spare; quoted lead time 8 weeks.",
    ),
    _doc(
        "PRC-201",
        "Cell price quotes for 2027",
        "2026-04-15",
        "2027 cell price quotes prices kestrel northwind halden",
        "2027 quotes at 200,000 cells a year: Kestrel Cells 2.35 EUR a cell, Northwind "
        "Energy 2.10 EUR a cell, Halden Power 2.60 EUR a cell; each holds for 18 months.",
        "The three suppliers quoted for 200,000 cells a year, delivered to our Rotterdam "
        "warehouse (DAP), payment at 60 days.",
        "Kestrel Cells: 2.35 EUR a cell, held for 18 months, 3% off above 300,000 cells. "
        "Northwind Energy: 2.10 EUR a cell, held for 18 months, with a surcharge clause "
        "tied to the lithium carbonate index. Halden Power: 2.60 EUR a cell, held for 18 "
        "months, no volume discount.",
        "Purchasing notes that the Northwind surcharge clause would have added 0.12 EUR a "
        "cell in 2025, and that all three quotes exclude tooling for the cell holders.",
    ),
    _doc(
        "FLD-301",
        "Field returns of battery packs, 2025",
        "2026-01-31",
        "battery pack field returns warranty claims 2025",
        "Packs returned under warranty in 2025, per 1,000 sold: Kestrel Cells 4.1, "
        "Northwind Energy 9.8, Halden Power 3.2; a return costs 420 EUR on average.",
        "Warranty returns of e-bike battery packs sold in 2025, by the supplier of their "
        "cells (all three supplied the 2025 line in smaller volumes).",
        "Per 1,000 packs sold: Kestrel Cells 4.1, Northwind Energy 9.8, Halden Power 3.2. "
        "The leading causes were a pack that no longer charges (41%), capacity loss within "
        "two years (33%) and damaged connectors (18%, not cell-related).",
        "A return costs 420 EUR on average: the replacement pack, the dealer's labour and "
        "shipping both ways.",
    ),
    _doc(
        "MTG-401",
        "Design review of the 2027 pack",
        "2026-03-18",
        "2027 pack design review layout count",
        "The 2027 pack is 48 V, 13S4P: 52 cells of the 21700 format, 936 Wh with 4.5 Ah "
        "cells or more.",
        "Attendees: electrical, mechanical and purchasing. Decision: the 2027 pack moves "
        "from 36 V to 48 V to serve the cargo bike, with the same frame mount.",
        "Layout: 13 cells in series, 4 in parallel (13S4P), 52 cells of the 21700 format; "
        "any of the three candidate cells fits the holder. The BMS is carried over.",
        "Open points: the thermal pad supplier, and a drop test of the new housing in May.",
    ),
    _doc(
        "LOG-501",
        "Freight rates from Asia, first quarter of 2026",
        "2026-04-02",
        "freight logistics shipping rates asia",
        "Container rates from Shanghai to Rotterdam fell 12% in the first quarter of 2026.",
        "Sea freight from Shanghai to Rotterdam: 40-foot container rates fell 12% in the "
        "first quarter; transit time is back to 34 days.",
    ),
)

_BY_ID = {d.id: d for d in _LIBRARY}

_SUPPLIERS = ("Kestrel Cells", "Northwind Energy", "Halden Power")

_PLAN = (
    ("audit", "battery cell supplier audits"),
    ("price", "2027 cell price quotes"),
    ("return", "battery pack field returns"),
    ("pack", "2027 pack design and layout"),
)
"""The searches the model makes, each when the question raises its topic."""

# -- the tools ----------------------------------------------------------------------------


def _notebook(ctx: ToolContext) -> dict[str, dict[str, str]]:
    """The run's notebook: where each tool files what it found, keyed so that the order the
    concurrent tools finish in makes no difference."""
    book: dict[str, dict[str, str]] = ctx.state.setdefault("notebook", {})
    for part in ("searched", "read", "costs"):
        book.setdefault(part, {})
    return book


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


def _search_library(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    query = str(args["query"])
    wanted = _words(query)
    score = {d.id: len(wanted & (d.tags | _words(d.title))) for d in _LIBRARY}
    # A document matches on two words or more, best first; ties keep the library's order.
    found = sorted((d for d in _LIBRARY if score[d.id] >= 2), key=lambda d: -score[d.id])[:5]
    _notebook(ctx)["searched"][query] = _searched_note(query, [d.id for d in found])
    return {
        "query": query,
        "results": [
            {"id": d.id, "title": d.title, "date": d.date, "snippet": d.text[:120] + "…"}
            for d in found
        ],
    }


def _read_document(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    doc = _BY_ID.get(str(args["id"]).strip().upper())
    if doc is None:
        raise ValueError(f"no document {args['id']!r} in the library")
    _notebook(ctx)["read"][doc.id] = _read_note(doc.id, doc.title, doc.date, doc.findings)
    return {
        "id": doc.id,
        "title": doc.title,
        "date": doc.date,
        "findings": doc.findings,
        "text": doc.text,
    }


def _pack_cost(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    cells_eur = round(args["cell_price_eur"] * args["cells"], 2)
    returns_eur = round(args["returns_per_1000"] / 1000 * args["return_cost_eur"], 2)
    out = {
        "supplier": args["supplier"],
        "cells": args["cells"],
        "cell_price_eur": args["cell_price_eur"],
        "cells_eur": cells_eur,
        "returns_eur": returns_eur,
        "pack_eur": round(cells_eur + returns_eur, 2),
    }
    _notebook(ctx)["costs"][str(args["supplier"])] = _cost_note(out)
    return out


_NUMBER = {"type": "number", "minimum": 0}

TOOLS: tuple[Tool, ...] = (
    define_tool(
        name="search_library",
        description="Search the document library; returns the matching documents' ids, "
        "titles, dates and opening lines, best first.",
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to look for."}},
            "required": ["query"],
            "additionalProperties": False,
        },
        execute=_search_library,
    ),
    define_tool(
        name="read_document",
        description="Read a document of the library in full, with its key findings.",
        input_schema={
            "type": "object",
            "properties": {"id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"}},
            "required": ["id"],
            "additionalProperties": False,
        },
        execute=_read_document,
    ),
    define_tool(
        name="pack_cost",
        description="The cost of one battery pack with a supplier's cells: the cells, plus "
        "the expected cost of warranty returns.",
        input_schema={
            "type": "object",
            "properties": {
                "supplier": {"type": "string"},
                "cell_price_eur": _NUMBER,
                "cells": {"type": "integer", "minimum": 1},
                "returns_per_1000": _NUMBER,
                "return_cost_eur": _NUMBER,
            },
            "required": [
                "supplier",
                "cell_price_eur",
                "cells",
                "returns_per_1000",
                "return_cost_eur",
            ],
            "additionalProperties": False,
        },
        execute=_pack_cost,
    ),
)

# -- notes: one line per thing learned, written alike by the summarizer and the notebook ---


def _searched_note(query: str, ids: list[str]) -> str:
    found = ", ".join(ids) if ids else "nothing"
    return f'- Searched the library for "{query}": found {found}.'


def _read_note(id: str, title: str, date: str, findings: str) -> str:
    return f'- Read {id}, "{title}" ({date}): {findings}'


def _cost_note(cost: dict[str, Any]) -> str:
    return (
        f"- Pack cost with {cost['supplier']}: {cost['pack_eur']:.2f} EUR "
        f"({cost['cells']} cells at {cost['cell_price_eur']:.2f} EUR, "
        f"{cost['returns_eur']:.2f} EUR of expected returns)."
    )


_SEARCHED = re.compile(r'^- Searched the library for "(.+)": found (.+)\.$', re.MULTILINE)
_READ = re.compile(r'^- Read ([A-Z]{3}-\d{3}), "(.+?)" \(([\d-]+)\): (.+)$', re.MULTILINE)
_COST = re.compile(
    r"^- Pack cost with (.+?): ([\d.]+) EUR \((\d+) cells at ([\d.]+) EUR, ([\d.]+) EUR of "
    r"expected returns\)\.$",
    re.MULTILINE,
)
_SUMMARY = re.compile(r"<summary>\n(.*?)\n</summary>", re.DOTALL)
_IDS = re.compile(r"[A-Z]{3}-\d{3}")


@dataclass
class _Known:
    """What the model knows, from whatever its request holds."""

    searched: dict[str, list[str]] = field(default_factory=dict)
    read: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    """id -> (title, date, findings)"""
    costs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def take_notes(self, text: str) -> None:
        for query, found in _SEARCHED.findall(text):
            self.searched.setdefault(query, _IDS.findall(found))
        for id, title, date, findings in _READ.findall(text):
            self.read.setdefault(id, (title, date, findings))
        for supplier, pack, cells, price, returns in _COST.findall(text):
            self.costs.setdefault(
                supplier,
                {
                    "supplier": supplier,
                    "pack_eur": float(pack),
                    "cells": int(cells),
                    "cell_price_eur": float(price),
                    "returns_eur": float(returns),
                },
            )

    def take_result(self, result: ToolResultMessage) -> None:
        if result.is_error:
            return
        try:
            value = orjson.loads(result.content)
        except orjson.JSONDecodeError:
            return
        if not isinstance(value, dict):
            return
        if result.name == "search_library":
            self.searched[value["query"]] = [r["id"] for r in value["results"]]
        elif result.name == "read_document":
            self.read[value["id"]] = (value["title"], value["date"], value["findings"])
        elif result.name == "pack_cost":
            self.costs[value["supplier"]] = value

    def notes(self) -> list[str]:
        lines = [_searched_note(q, ids) for q, ids in self.searched.items()]
        lines += [_read_note(id, *self.read[id]) for id in self.read]
        lines += [_cost_note(self.costs[s]) for s in _SUPPLIERS if s in self.costs]
        lines += [_cost_note(c) for s, c in self.costs.items() if s not in _SUPPLIERS]
        return lines


def _known(request: Request) -> _Known:
    known = _Known()
    for segment in request.system:
        known.take_notes(segment.text)  # the notebook, when the agent keeps one
    for m in request.messages:
        if isinstance(m, UserMessage):
            for summary in _SUMMARY.findall(m.content):
                known.take_notes(summary)
        elif isinstance(m, ToolResultMessage):
            known.take_result(m)
    return known


# -- the scripted model ------------------------------------------------------------------


def _figures(known: _Known) -> dict[str, Any]:
    """The numbers a pack's cost needs, from the findings read so far."""
    text = "\n".join(findings for _, _, findings in known.read.values())
    out: dict[str, Any] = {}
    cells = re.search(r"(\d+) cells of the", text)
    if cells:
        out["cells"] = int(cells.group(1))
    prices = dict(re.findall(r"(\w+ \w+) ([\d.]+) EUR a cell", text))
    returns = re.search(r"per 1,000 sold: (.+?); a return costs ([\d.]+) EUR", text)
    for supplier in _SUPPLIERS:
        if supplier in prices:
            out.setdefault("prices", {})[supplier] = float(prices[supplier])
    if returns:
        rates = dict(re.findall(r"(\w+ \w+) ([\d.]+)", returns.group(1)))
        out["returns"] = {s: float(rates[s]) for s in _SUPPLIERS if s in rates}
        out["return_cost"] = float(returns.group(2))
    return out


def _respond(request: Request) -> dict[str, Any]:
    question = next((m.content for m in request.messages if isinstance(m, UserMessage)), "")
    known = _known(request)

    def call(key: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        # Named after what it asks, which the script asks once a run: ids stay unique in the
        # run whatever has left the window.
        return {"id": f"{name}:{key}", "name": name, "args": args}

    unread = [id for ids in known.searched.values() for id in ids if id not in known.read]
    if unread:
        doc = unread[0]
        return {
            "content": f"Reading {doc}.",
            "tool_calls": [call(doc, "read_document", {"id": doc})],
        }
    for topic, query in _PLAN:
        if topic in question.lower() and query not in known.searched:
            return {
                "content": f"Searching the library for {query}.",
                "tool_calls": [call(topic, "search_library", {"query": query})],
            }
    figures = _figures(known)
    missing = [s for s in figures.get("prices", {}) if s not in known.costs]
    if missing and "cells" in figures:
        returns = figures.get("returns", {})
        calls = [
            call(
                s.split()[0].lower(),
                "pack_cost",
                {
                    "supplier": s,
                    "cell_price_eur": figures["prices"][s],
                    "cells": figures["cells"],
                    "returns_per_1000": returns.get(s, 0.0),
                    "return_cost_eur": figures.get("return_cost", 0.0),
                },
            )
            for s in missing
        ]
        return {"content": "Working out a pack's cost with each supplier.", "tool_calls": calls}
    return {"content": _answer(known, figures)}


def _answer(known: _Known, figures: dict[str, Any]) -> str:
    audits = {
        title.removeprefix("Supplier audit: "): (id, findings)
        for id, (title, _, findings) in known.read.items()
        if title.startswith("Supplier audit: ")
    }
    costs = {s: known.costs[s] for s in _SUPPLIERS if s in known.costs}
    if not costs:
        return "I could not work out a pack's cost with the documents I found."

    def open_findings(supplier: str) -> int:
        found = re.search(r"(\d+) major findings? open", audits.get(supplier, ("", ""))[1])
        return int(found.group(1)) if found else 0

    clean = [s for s in costs if open_findings(s) == 0] or list(costs)
    pick = min(clean, key=lambda s: costs[s]["pack_eur"])
    cells = next(iter(costs.values()))["cells"]
    listed = [f"{costs[s]['pack_eur']:.2f} EUR with {s}" for s in costs]
    sources = [id for id in known.read if id in ("PRC-201", "FLD-301", "MTG-401")]
    parts = [
        f"I recommend {pick}.",
        f"Counting expected warranty returns, a {cells}-cell pack costs "
        + ", ".join(listed[:-1])
        + f" and {listed[-1]} ({', '.join(sources)}).",
    ]
    returns = figures.get("returns", {})
    for s in costs:
        if s == pick:
            continue
        gap = costs[s]["pack_eur"] - costs[pick]["pack_eur"]
        audit = audits.get(s, ("no audit read", ""))[0]
        if gap < 0 and open_findings(s):
            why = f"its audit left {open_findings(s)} major findings open ({audit})"
            if s in returns and pick in returns:
                why += (
                    f" and its packs came back {returns[s]} times per 1,000 sold, against "
                    f"{returns[pick]} for {pick}"
                )
            parts.append(f"{s} is {-gap:.2f} EUR a pack cheaper, but {why}.")
        else:
            parts.append(f"{s} passed its audit ({audit}) but costs {gap:.2f} EUR more a pack.")
    return " ".join(parts)


# -- the scripted summarizer -------------------------------------------------------------

_RESULT = re.compile(r"^\[tool result (\w+)\] (\{.*\})$", re.MULTILINE)


def _summarize(request: Request) -> str:
    """A summary that keeps, as one bullet each, every search made, every document read
    with its findings, and every cost worked out; an earlier summary's bullets carry over."""
    transcript = "\n".join(m.content for m in request.messages if isinstance(m, UserMessage))
    known = _Known()
    for summary in _SUMMARY.findall(transcript):
        known.take_notes(summary)
    for name, body in _RESULT.findall(transcript):
        known.take_result(ToolResultMessage(tool_call_id="", name=name, content=body))
    notes = known.notes()
    if not notes:
        return "Nothing has been found yet."
    return "What the agent has established so far:\n" + "\n".join(notes)


# -- the notebook (sliding variant) ------------------------------------------------------


def _notebook_text(s: RunView) -> str:
    book = s.state.get("notebook") or {}
    lines = [*book.get("searched", {}).values(), *book.get("read", {}).values()]
    costs = book.get("costs", {})
    lines += [costs[name] for name in sorted(costs, key=_supplier_order)]
    if not lines:
        return "Research notebook: nothing noted yet."
    return "Research notebook, kept by the tools (older turns may have left the window):\n" + (
        "\n".join(lines)
    )


def _supplier_order(name: str) -> tuple[int, str]:
    return (_SUPPLIERS.index(name) if name in _SUPPLIERS else len(_SUPPLIERS), name)


def build_agent(
    *,
    record: bool | str | Path | RecordingConfig = True,
    strategy: Strategy = "summarize",
) -> Agent:
    """The demo agent. ``record`` is as for ``Agent.create``. ``strategy``: ``"summarize"``
    (summarize_oldest, through ``.compaction(...)``) or ``"sliding"`` (sliding_window, with
    a notebook in the system prompt carrying what older turns held)."""
    builder = (
        Agent.create(
            provider=mock(respond=_respond, authoritative=True),
            model="mock-research",
            max_iterations=24,
            record=record,
            name=NAME,
        )
        .system(SYSTEM)
        .tools(TOOLS)
    )
    if strategy == "summarize":
        builder = builder.compaction(
            threshold_tokens=THRESHOLD_TOKENS,
            summarizer=mock(respond=_summarize, authoritative=True),
            model="mock-summarizer",
            keep_recent_turns=0,
        )
    elif strategy == "sliding":
        builder = builder.fact(_notebook_text, id="notebook").window(
            sliding_window(keep_recent_turns=2)
        )
    else:
        raise ValueError(f"strategy is 'summarize' or 'sliding', got {strategy!r}")
    agent = builder.build()
    # Named by what builds it, a spec `af run` loads, rather than by a line number.
    builds = "build_agent" if strategy == "summarize" else "build_sliding_agent"
    agent.source = f"{__name__}:{builds}"
    return agent


def build_sliding_agent(*, record: bool | str | Path | RecordingConfig = True) -> Agent:
    """The same research agent keeping its window with sliding_window(keep_recent_turns=2)
    and a notebook: ``build_agent(strategy="sliding")``."""
    return build_agent(record=record, strategy="sliding")
