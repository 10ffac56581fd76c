"""trip-demo: a small trip-planning agent that runs offline, for `af run` with no agent.

The model is a scripted mock whose every reply is computed from the request alone (the
system text, the messages and the tools it was sent), so two runs write the same recording
apart from run ids and timings. The agent engineers its context with every kind of
injection, and the script reacts to what they put in the request:

- a steering rule (always, system): take facts only from the tools;
- a computed fact (system, evaluated every iteration): which step of the turn this call is;
- a rule-triggered instruction (messages): when the traveller names a currency, a note to
  quote prices in it; the script takes the currency it converts to from this note;
- an on-tool-return instruction (messages, after ``weather``): let the forecast shape the
  plan; on a rainy day the script then looks for an indoor alternative to a park;
- a skill, ``prices``, listed in ``read_skill``'s catalog, that brings ``convert_currency``:
  the script reads the skill when a price needs converting, and calls the tool only once it
  is in the tools slot.

With the default message the run goes:

1. the weather and the places to visit, asked in one reply (the two tools run concurrently);
2. the forecast instruction lands; a museum ticket needs converting, so ``read_skill("prices")``;
3. the skill's text and its tool arrive; a conversion with a malformed amount (``"12 EUR"``),
   refused by the argument validator with a correction the model reads;
4. the same conversion, fixed;
5. the answer, written from the tool results the request holds.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from afcore.agent import Agent
from afcore.injections import RunView
from afcore.messages import Request, ToolResultMessage, UserMessage
from afcore.providers import mock
from afcore.recording import RecordingConfig
from afcore.tools import Tool, ToolContext, define_tool

__all__ = ["DEFAULT_MESSAGE", "NAME", "RAINY_MESSAGE", "build_agent"]

NAME = "trip-demo"

DEFAULT_MESSAGE = (
    "I have a free Saturday in Lisbon. How will the weather be, which museum should I "
    "visit, and what does a ticket cost in US dollars?"
)

RAINY_MESSAGE = "Where can I go for a walk in Paris on Saturday? Prices in pounds, please."
"""A second message: rain is likely in Paris, so the forecast instruction changes the plan."""

SYSTEM = (
    "You are trip-demo, a travel assistant who plans one day in one city. "
    "Check the weather first, then pick places that suit it. "
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
    # Always visible; convert_currency comes with the prices skill.
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
)

CONVERT_CURRENCY: Tool = define_tool(
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
)

# -- the context it engineers ------------------------------------------------------------

_TARGETS = (
    (r"\b(USD|US dollars?|dollars?)\b", "USD"),
    (r"\b(GBP|pounds?)\b", "GBP"),
    (r"\b(JPY|yen)\b", "JPY"),
    (r"\b(CHF|Swiss francs?)\b", "CHF"),
    (r"\b(EUR|euros?)\b", "EUR"),
)

STEERING = "Take facts only from your tools: never invent a place, a price or a forecast."


def _named_currency(text: str) -> str | None:
    """The currency a message names (`US dollars` -> USD), if any."""
    for pattern, code in _TARGETS:
        if re.search(pattern, text, re.IGNORECASE):
            return code
    return None


def _names_a_currency(s: RunView) -> bool:
    return _named_currency(s.user_message) is not None


def _currency_note(s: RunView) -> str:
    code = _named_currency(s.user_message)
    return f"The traveller wants prices in {code}: quote every price in {code} too, with the rate."


FORECAST_NOTE = (
    "The forecast is in. Let it shape the plan: when rain is likely, prefer a place indoors "
    "to a park; say what the weather will be in the answer."
)


def _step(s: RunView) -> str:
    return (
        f"This is step {s.iteration} of the turn. Keep to a few steps: answer once the tools "
        "have told you enough."
    )


PRICES = "prices"
PRICES_DESCRIPTION = "Prices in another currency: the exchange tool and how to quote a price."
PRICES_BODY = (
    "Converting prices: convert each price with convert_currency, from the currency it is "
    "listed in to the traveller's. Quote the listed price, the converted one and the rate."
)

# -- the scripted model ------------------------------------------------------------------

_WANTS = re.compile(r"The traveller wants prices in ([A-Z]{3})\b")
_CATALOG = re.compile(r"^- ([\w-]+): (.*)$", re.MULTILINE)
_RAINY = 0.5
"""From this chance of rain, the forecast instruction sends a park-goer indoors."""


def _read_request(request: Request) -> tuple[str, dict[str, list[ToolResultMessage]]]:
    """The user's message and the tool results so far, by tool name."""
    user = next((m.content for m in request.messages if isinstance(m, UserMessage)), "")
    results: dict[str, list[ToolResultMessage]] = {}
    for m in request.messages:
        if isinstance(m, ToolResultMessage):
            results.setdefault(m.name, []).append(m)
    return user, results


def _notes(request: Request) -> list[str]:
    """The user-role texts after the traveller's message: what the application added."""
    users = [m.content for m in request.messages if isinstance(m, UserMessage)]
    return users[1:]


def _wanted_currency(request: Request) -> str | None:
    """The currency to quote prices in, as the request's instructions say (None: as listed)."""
    for note in _notes(request):
        match = _WANTS.search(note)
        if match:
            return match.group(1)
    return None


def _skill_for(request: Request, topic: str) -> str | None:
    """The id of a skill in read_skill's catalog whose description mentions ``topic``."""
    reader = next((t for t in request.tools if t.name == "read_skill"), None)
    if reader is None:
        return None
    for skill_id, description in _CATALOG.findall(reader.description):
        if topic in description.lower():
            return str(skill_id)
    return None


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
    visible = {t.name for t in request.tools}
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
    weather = _json(results["weather"][-1])
    places = _json(results.get("find_places", [None])[-1])
    if (
        weather is not None
        and any(note.startswith("The forecast is in.") for note in _notes(request))
        and weather["rain_chance"] >= _RAINY
        and (places or {}).get("kind") == "park"
    ):
        # The instruction that came with the forecast: rain is likely, so look indoors.
        return {
            "content": f"Rain is likely in {weather['city']}; let me find somewhere indoors.",
            "tool_calls": [call(1, "find_places", {"city": weather["city"], "kind": "museum"})],
        }
    priced = _priced(places)
    target = _wanted_currency(request)
    conversions = results.get("convert_currency", [])
    if priced is not None and target is not None and priced["currency"] != target:
        if "convert_currency" in visible:
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
        else:
            skill = _skill_for(request, "currency")
            if skill is not None and "read_skill" not in results:
                return {
                    "content": f"To quote {priced['name']} in {target} I need the {skill} skill.",
                    "tool_calls": [call(1, "read_skill", {"id": skill})],
                }
    return {"content": _answer(user, weather, places, priced, target, conversions)}


def _answer(
    user: str,
    weather: dict[str, Any] | None,
    places: dict[str, Any] | None,
    priced: dict[str, Any] | None,
    target: str | None,
    conversions: list[ToolResultMessage],
) -> str:
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
    converted = _json(conversions[-1]) if conversions else None
    if priced is not None:
        what = "A meal at" if (places or {}).get("kind") == "restaurant" else "A ticket for"
        price = f"{what} {priced['name']} costs {priced['price']} {priced['currency']}"
        if converted is not None:
            parts.append(
                f"{price}, about {converted['result']:.2f} {converted['to']} "
                f"(at {converted['rate']} {converted['to']} per {converted['from']})."
            )
        elif target is None or priced["currency"] == target:
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
        .steering(STEERING, id="facts-only")
        .fact(_step, id="step")
        .instruction(_currency_note, id="currency", when=_names_a_currency)
        .instruction(FORECAST_NOTE, id="forecast", after="weather")
        .skill(
            PRICES,
            description=PRICES_DESCRIPTION,
            body=PRICES_BODY,
            tools=[CONVERT_CURRENCY],
            slot="system",
        )
        .build()
    )
    # Named by what builds it rather than by a line number, which moves with every edit.
    agent.source = f"{__name__}:build_agent"
    return agent
