"""Router: a Conditional sends each question to the agent for its kind.

af run examples/router.py "How do I reset my password?"
"""

from __future__ import annotations

from afcore import Agent, mock
from afcore.flows import Conditional, FlowView, Sequence


def expert(name: str, answer: str) -> Agent:
    return Agent.create(provider=mock(reply=answer), model="mock", name=name).build()


def classify(s: FlowView) -> None:
    text = str(s.message).lower()
    s["kind"] = "account" if "password" in text or "login" in text else "product"


router = (
    Sequence.create("router")
    .step("classify", classify)
    .step(
        "route",
        Conditional.create("route")
        .when(
            "account",
            lambda s: s["kind"] == "account",
            expert("accounts", "Use 'Forgot password' on the sign-in page."),
        )
        .otherwise("product", expert("products", "The Pro plan includes 5 seats."))
        .build(),
    )
    .build()
)

if __name__ == "__main__":
    print(router.run("How do I reset my password?"))
