"""trip-demo: a small trip-planning agent that runs offline, for `af run` with no agent.

The model is a scripted mock whose every reply is computed from the messages of the request
alone, so two runs write the same recording apart from run ids and timings. The script
shows what af records:

1. the weather and the places to visit, asked in one reply (the two tools run concurrently);
2. a currency conversion with a malformed amount (``"12 EUR"``), refused by the argument
   validator with a correction the model reads;
3. the same conversion, fixed;
4. the answer, written from the tool results the request holds.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from afcore.agent import Agent
from afcore.messages import Request, ToolResultMessage, UserMessage
from afcore.providers import mock
from afcore.recording import RecordingConfig
from afcore.tools import Tool, ToolContext, define_tool

__all__ = ["DEFAULT_MESSAGE", "NAME", "build_agent"]

NAME = "trip-demo"

DEFAULT_MESSAGE = (
    "I have a free Saturday in Lisbon. How will the weather be, which museum should I "
    "visit, and what does a ticket cost in US dollars?"
)

SYSTEM = (
    "You are trip-demo, a travel assistant who plans one day in one city. "
    "Check the weather first, then pick places that suit it, and give prices in the "
    "traveller's own currency. "
    "Take facts only from your tools: never invent a place, a price or a forecast. "
    "Answer in a short paragraph."
)

# -- the tools' fixed world --------------------------------------------------------------

_WEATHER: dict[str, dict[str, Any]] = {
    "Lisbon": {"condition": "sunny", "high_c": 24, "low_c": 16, "rain_chance": 0.05},
    "Paris": {"condition": "light rain", "high_c": 17, "low_c": 11, "rain_chance": 0.6},
    "Kyoto": {"condition": "cloudy", "high_c": 21, "low_c": 14, "rain_chance": 0.3},
    "New York": {"condition": "windy", "high_c": 19, "low_c": 12, "rain_chance": 0.2},
}

_CURRENCY = {"Lisbon": "EUR", "Paris": "EUR", "Kyoto": "JPY", "New York": "USD"}

_PLACES: dict[str, dict[str, list[dict[str, Any]]]] = {
    "Lisbon": {
        "museum": [
            {"name": "Calouste Gulbenkian Museum", "area": "Avenidas Novas", "price": 12},
            {"name": "National Tile Museum", "area": "Xabregas", "price": 8},
            {"name": "MAAT", "area": "Belém", "price": 11},
        ],
        "park": [
            {"name": "Gulbenkian Garden", "area": "Avenidas Novas", "price": 0},
            {"name": "Monsanto Forest Park", "area": "Monsanto", "price": 0},
        ],
        "restaurant": [
            {"name": "Taberna da Rua das Flores", "area": "Chiado", "price": 30},
            {"name": "Cervejaria Ramiro", "area": "Intendente", "price": 45},
        ],
    },
    "Paris": {
        "museum": [
            {"name": "Musée d'Orsay", "area": "7th arrondissement", "price": 16},
            {"name": "Musée Rodin", "area": "7th arrondissement", "price": 14},
        ],
        "park": [{"name": "Jardin du Luxembourg", "area": "6th arrondissement", "price": 0}],
        "restaurant": [{"name": "Bouillon Chartier", "area": "9th arrondissement", "price": 25}],
    },
    "Kyoto": {
        "museum": [{"name": "Kyoto National Museum", "area": "Higashiyama", "price": 700}],
        "park": [{"name": "Maruyama Park", "area": "Higashiyama", "price": 0}],
        "restaurant": [{"name": "Nishiki Market stalls", "area": "Nakagyo", "price": 2500}],
    },
    "New York": {
        "museum": [{"name": "The Met", "area": "Upper East Side", "price": 30}],
        "park": [{"name": "Central Park", "area": "Manhattan", "price": 0}],
        "restaurant": [{"name": "Katz's Delicatessen", "area": "Lower East Side", "price": 35}],
    },
}

_RATING = {"museum": 4.7, "park": 4.6, "restaurant": 4.5}

_PER_EUR = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85, "JPY": 162.0, "CHF": 0.95}
"""How much of each currency one euro buys (fixed: this is a demo)."""


def _city(name: str) -> str:
    for known in _WEATHER:
        if known.lower() == name.strip().lower():
            return known
    return name.strip().title()


def _weather(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    city = _city(args["city"])
    # A city the demo does not know still gets a plausible, stable forecast.
    known = _WEATHER.get(city, {"condition": "mild", "high_c": 20, "low_c": 13, "rain_chance": 0.2})
    return {"city": city, **known}


def _find_places(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    city, kind = _city(args["city"]), args["kind"]
    found = _PLACES.get(city, {}).get(kind, [])
    currency = _CURRENCY.get(city, "EUR")
    places = [
        {**p, "currency": currency, "rating": round(_RATING[kind] - i * 0.2, 1)}
        for i, p in enumerate(found)
    ]
    return {"city": city, "kind": kind, "places": places}


def _convert_currency(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    amount, source, target = args["amount"], args["from"], args["to"]
    for code in (source, target):
        if code not in _PER_EUR:
            raise ValueError(f"no exchange rate for {code}; known: {', '.join(_PER_EUR)}")
    rate = _PER_EUR[target] / _PER_EUR[source]
    return {
        "amount": amount,
        "from": source,
        "to": target,
        "rate": round(rate, 4),
        "result": round(amount * rate, 2),
    }


_CODE = {"type": "string", "pattern": "^[A-Z]{3}$"}

TOOLS: tuple[Tool, ...] = (
    define_tool(
        name="weather",
        description="The forecast for a city: condition, high and low in °C, chance of rain.",
        input_schema={
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name."}},
            "required": ["city"],
            "additionalProperties": False,
        },
        execute=_weather,
    ),
    define_tool(
        name="find_places",
        description="Places worth a visit in a city, best first, with entry prices.",
        input_schema={
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city's name."},
                "kind": {"type": "string", "enum": ["museum", "park", "restaurant"]},
            },
            "required": ["city", "kind"],
            "additionalProperties": False,
        },
        execute=_find_places,
    ),
    define_tool(
        name="convert_currency",
        description="Convert an amount between currencies given as ISO 4217 codes (EUR, USD).",
        input_schema={
            "type": "object",
            "properties": {
                "amount": {"type": "number", "description": "The amount, a number."},
                "from": {**_CODE, "description": "The currency of the amount."},
                "to": {**_CODE, "description": "The currency wanted."},
            },
            "required": ["amount", "from", "to"],
            "additionalProperties": False,
        },
        execute=_convert_currency,
    ),
)

# -- the scripted model ------------------------------------------------------------------

_TARGETS = (
    (r"\b(USD|US dollars?|dollars?)\b", "USD"),
    (r"\b(GBP|pounds?)\b", "GBP"),
    (r"\b(JPY|yen)\b", "JPY"),
    (r"\b(CHF|Swiss francs?)\b", "CHF"),
    (r"\b(EUR|euros?)\b", "EUR"),
)


def _read_request(request: Request) -> tuple[str, dict[str, list[ToolResultMessage]]]:
    """The user's message and the tool results so far, by tool name."""
    user = next((m.content for m in request.messages if isinstance(m, UserMessage)), "")
    results: dict[str, list[ToolResultMessage]] = {}
    for m in request.messages:
        if isinstance(m, ToolResultMessage):
            results.setdefault(m.name, []).append(m)
    return user, results


def _asked_city(user: str) -> str:
    for city in _WEATHER:
        if city.lower() in user.lower():
            return city
    match = re.search(r"\b(?:in|to|at) ([A-Z][\w'-]+(?: [A-Z][\w'-]+)?)", user)
    return match.group(1) if match else "Lisbon"


def _asked_kind(user: str) -> str:
    text = user.lower()
    if re.search(r"\b(eat|food|dinner|lunch|restaurants?)\b", text):
        return "restaurant"
    if re.search(r"\b(parks?|gardens?|outdoors?|walk)\b", text):
        return "park"
    return "museum"


def _asked_currency(user: str) -> str:
    for pattern, code in _TARGETS:
        if re.search(pattern, user, re.IGNORECASE):
            return code
    return "USD"


def _json(result: ToolResultMessage | None) -> Any:
    if result is None or result.is_error:
        return None
    try:
        return orjson.loads(result.content)
    except orjson.JSONDecodeError:
        return None


def _priced(places: dict[str, Any] | None) -> dict[str, Any] | None:
    """The first place found that charges for entry: the one whose price gets converted."""
    for place in (places or {}).get("places", []):
        if place.get("price"):
            return dict(place)
    return None


def _respond(request: Request) -> dict[str, Any]:
    user, results = _read_request(request)
    n = sum(1 for m in request.messages if m.role == "assistant") + 1

    def call(i: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"trip-{n}-{i}", "name": name, "args": args}

    if "weather" not in results:
        city = _asked_city(user)
        return {
            "content": f"Let me check the weather in {city} and find places to visit.",
            "tool_calls": [
                call(1, "weather", {"city": city}),
                call(2, "find_places", {"city": city, "kind": _asked_kind(user)}),
            ],
        }
    places = _json(results.get("find_places", [None])[-1])
    priced = _priced(places)
    conversions = results.get("convert_currency", [])
    target = _asked_currency(user)
    if priced is not None and priced["currency"] != target:
        if not conversions:
            # A slip a real model makes: the currency folded into the amount.
            args = {
                "amount": f"{priced['price']} {priced['currency']}",
                "from": priced["currency"],
                "to": target,
            }
            return {
                "content": f"Now the price of {priced['name']} in {target}.",
                "tool_calls": [call(1, "convert_currency", args)],
            }
        if conversions[-1].is_error and len(conversions) < 3:
            args = {"amount": priced["price"], "from": priced["currency"], "to": target}
            return {
                "content": "The amount must be a number; trying again.",
                "tool_calls": [call(1, "convert_currency", args)],
            }
    return {"content": _answer(user, results, places, priced, target)}


def _answer(
    user: str,
    results: dict[str, list[ToolResultMessage]],
    places: dict[str, Any] | None,
    priced: dict[str, Any] | None,
    target: str,
) -> str:
    weather = _json(results["weather"][-1])
    if weather is None:
        return "I could not get a forecast, so I would rather not plan the day blind."
    rain = round(weather["rain_chance"] * 100)
    parts = [
        f"The forecast for {weather['city']}: {weather['condition']}, "
        f"{weather['low_c']}–{weather['high_c']} °C, {rain}% chance of rain."
    ]
    found = (places or {}).get("places", [])
    if not found:
        parts.append(f"I found no {_asked_kind(user)} to suggest there.")
    else:
        best, others = found[0], found[1:]
        parts.append(f"My pick: {best['name']} in {best['area']} (rated {best['rating']}).")
        if others:
            parts.append("Also worth a look: " + ", ".join(p["name"] for p in others) + ".")
    conversions = results.get("convert_currency", [])
    converted = _json(conversions[-1]) if conversions else None
    if priced is not None:
        what = "A meal at" if (places or {}).get("kind") == "restaurant" else "A ticket for"
        price = f"{what} {priced['name']} costs {priced['price']} {priced['currency']}"
        if converted is not None:
            parts.append(
                f"{price}, about {converted['result']:.2f} {converted['to']} "
                f"(at {converted['rate']} {converted['to']} per {converted['from']})."
            )
        elif priced["currency"] == target:
            parts.append(f"{price}.")
        else:
            parts.append(f"{price}; I could not convert it to {target}.")
    return " ".join(parts)


def build_agent(*, record: bool | str | Path | RecordingConfig = True) -> Agent:
    """The demo agent. ``record`` is as for ``Agent.create``: False runs it without writing a
    recording, a folder or a :class:`RecordingConfig` chooses where and how."""
    agent = (
        Agent.create(
            provider=mock(respond=_respond),
            model="mock-trip",
            max_iterations=8,
            record=record,
            name=NAME,
        )
        .system(SYSTEM)
        .tools(TOOLS)
        .build()
    )
    # Named by what builds it rather than by a line number, which moves with every edit.
    agent.source = f"{__name__}:build_agent"
    return agent
