"""router-demo: a support ticket routed to one of two agents, offline, for
``af run --demo router``.

A flow of two steps: ``triage``, a function that reads the ticket and writes its ``intent``
and ``priority`` to the flow's state, then ``route``, a Conditional that sends billing
tickets to ``billing`` and the rest to ``tech``. Each agent has its own tools and
injections, and a scripted model whose replies are computed from the request alone:

- ``billing`` looks the invoice up (``lookup_invoice``) and answers from what it returned;
  its instruction ``urgent`` lands when the flow's state says the ticket is urgent (a rule
  of one agent reading a value another step wrote: ``af why RUN answer`` follows it back);
- ``tech`` checks the service (``service_status``) under a steering rule that it never
  asks for passwords.
"""

from __future__ import annotations

import re
from typing import Any

from afcore.agent import Agent
from afcore.flows import Conditional, FlowView, Sequence
from afcore.injections import RunView
from afcore.messages import Request, ToolResultMessage, UserMessage
from afcore.providers import mock
from afcore.tools import define_tool

__all__ = ["DEFAULT_MESSAGE", "build_flow"]

DEFAULT_MESSAGE = "Invoice 1042 charged me twice. Please fix it urgently!"

URGENT_NOTE = "The ticket is urgent: apologise first, then say what happens next and when."

_INVOICES = {
    "1042": {"id": "1042", "amount": "49.00 EUR", "charges": 2, "status": "paid"},
    "2001": {"id": "2001", "amount": "12.00 EUR", "charges": 1, "status": "open"},
}


def triage(s: FlowView) -> str:
    """Reads the ticket; writes what the route decides on."""
    text = str(s.message).lower()
    s["intent"] = "billing" if re.search(r"invoice|charge|refund|bill", text) else "tech"
    s["priority"] = "high" if re.search(r"urgent|asap|now", text) else "normal"
    return str(s.message)


def _lookup(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    found = _INVOICES.get(str(args["invoice"]))
    if found is None:
        return {"error": f"no invoice {args['invoice']}"}
    return found


def _status(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"service": args["service"], "status": "degraded", "since": "09:40 UTC"}


LOOKUP = define_tool(
    "lookup_invoice",
    "Look up an invoice by its number: amount, how many times it was charged, status.",
    {"type": "object", "properties": {"invoice": {"type": "string"}}, "required": ["invoice"]},
    _lookup,
)
STATUS = define_tool(
    "service_status",
    "The current status of one of our services.",
    {"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]},
    _status,
)


def _urgent(s: RunView) -> bool:
    return s.state.get("priority") == "high"


def _parts(request: Request) -> tuple[str, list[ToolResultMessage], str]:
    user = next((m.content for m in request.messages if isinstance(m, UserMessage)), "")
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    notes = " ".join(
        m.content for m in request.messages if isinstance(m, UserMessage) and m.content != user
    )
    return user, results, notes


def _billing(request: Request) -> dict[str, Any]:
    user, results, notes = _parts(request)
    if not results:
        number = re.search(r"\d{3,}", user)
        return {
            "content": "Let me look that invoice up.",
            "tool_calls": [
                {
                    "id": "billing-1",
                    "name": "lookup_invoice",
                    "args": {"invoice": number.group(0) if number else "unknown"},
                }
            ],
        }
    found = results[-1].content
    sorry = "I'm sorry for the trouble. " if "urgent" in notes else ""
    if '"charges":2' in found.replace(" ", ""):
        return {
            "content": f"{sorry}Invoice 1042 was charged twice; the second charge of 49.00 EUR "
            "is refunded today and reaches your account within 3 working days."
        }
    return {"content": f"{sorry}I found the invoice and it was charged once: {found}"}


def _tech(request: Request) -> dict[str, Any]:
    user, results, _ = _parts(request)
    if not results:
        return {
            "content": "Let me check the service.",
            "tool_calls": [{"id": "tech-1", "name": "service_status", "args": {"service": "sync"}}],
        }
    return {
        "content": "Our sync service has been degraded since 09:40 UTC; a fix is rolling "
        "out. Your data is safe; no need to change your password."
    }


def build_flow(*, record: Any = True) -> Sequence:
    """The demo flow. ``record`` is as for ``Sequence.create``."""
    billing = (
        Agent.create(provider=mock(respond=_billing), model="mock-billing", name="billing")
        .system("You are the billing desk. Look invoices up before answering.")
        .tool(LOOKUP)
        .instruction(URGENT_NOTE, id="urgent", when=_urgent)
        .build()
    )
    tech = (
        Agent.create(provider=mock(respond=_tech), model="mock-tech", name="tech")
        .system("You are technical support. Check the service before answering.")
        .tool(STATUS)
        .steering("Never ask a customer for a password.", id="no-passwords")
        .build()
    )
    billing.source = tech.source = f"{__name__}:build_flow"
    route = (
        Conditional.create("route")
        .when("billing", lambda s: s["intent"] == "billing", billing)
        .otherwise("tech", tech)
        .build()
    )
    flow = (
        Sequence.create("support", record=record)
        .step("triage", triage)
        .step("route", route)
        .build()
    )
    flow.source = f"{__name__}:build_flow"  # what af replay loads to run it again
    return flow
