"""Governance decisions in words, as ``af why``, ``af show`` and the Lens say them."""

from __future__ import annotations

from typing import Any

__all__ = ["decision_words", "said"]


def decision_words(key: str, value: Any) -> list[str]:
    """A governance write (``govern:...``, ``approval:...``, ``output:<n>``) in words, one
    line each: each link's answer, a person's, an output check."""
    if not isinstance(value, dict):
        return []
    if key.startswith("approval:"):
        verb = "approved" if value.get("verb") == "approve" else "declined"
        text = f"{verb} by {value.get('by', '?')} at {value.get('at', '?')}"
        text += f": {said(value['why'], 80)}" if value.get("why") else ""
        return [f"{text} (asked by {value.get('link', '?')}: {said(value.get('question'), 80)})"]
    if key.startswith("output:"):
        tier = value.get("tier", "answer")
        what = "the answer" if tier == "answer" else f"the {tier} value"
        if value.get("ok"):
            return [f"output check {value.get('attempt', '?')}: {what} holds to the schema"]
        errors = value.get("errors") or []
        problems = "; ".join(
            f"{e.get('path')}: {e.get('message')}" for e in errors[:3] if isinstance(e, dict)
        )
        if value.get("error"):
            problems = f"it raised {value['error']}"
        sent = ", sent back to the model" if value.get("retry") else ""
        return [
            f"output check {value.get('attempt', '?')}: {what} fails the schema: "
            f"{said(problems, 120)}{sent}"
        ]
    moment = value.get("moment")
    noun = {
        "tool_call": "the arguments",
        "tool_result": "the result",
        "input": "the message",
        "output": "the answer",
    }.get(str(moment), "the value")
    out = []
    for link in value.get("links") or ():
        if not isinstance(link, dict):
            continue
        name, answer = str(link.get("link", "?")), link.get("verb")
        if answer == "allow":
            out.append(
                f"{name} changed {noun}: {said(link.get('why'), 80)}"
                if link.get("changed")
                else f"{name} allowed {noun}"
            )
        elif answer == "ask":
            out.append(f"{name} asked a person: {said(link.get('question'), 80)}")
        elif link.get("error"):
            out.append(f"{name} failed, which denies: {said(link.get('error'), 80)}")
        else:
            out.append(f"{name} denied {noun}: {said(link.get('reason'), 80)}")
    if value.get("problems"):
        out.append(f"{noun} as changed break the tool's schema: denied")
    if value.get("not_walked"):
        out.append(f"not asked: {', '.join(map(str, value['not_walked']))}")
    return out


def said(value: Any, limit: int = 80) -> str:
    """Words a link or a person wrote, on one line, cut to ``limit`` (the cut stated)."""
    text = " ".join(str(value if value is not None else "").split())
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more chars)"
