"""Events as the tests send them: the payload builders of the contract's two event kinds, in
its field order (README, "The event contract")."""

from __future__ import annotations

OCCURRED_AT = "2026-11-21T10:00:00Z"  # when an event happened, unless the test says


def order(event_id: str, order_id: str, sequence, event_type: str = "order_updated",
          status: str = "paid", amount="10.00", occurred_at: str = OCCURRED_AT,
          **extra) -> dict:
    payload = {"event_id": event_id, "event_type": event_type, "order_id": order_id,
               "sequence": sequence, "occurred_at": occurred_at, "customer_id": "c1",
               "status": status, "amount": amount, "currency": "EUR"}
    payload.update(extra)
    return payload


def reward(event_id: str, player_id: str, xp, occurred_at: str = OCCURRED_AT) -> dict:
    return {"event_id": event_id, "event_type": "xp_granted", "player_id": player_id, "xp": xp,
            "reason": "quest", "occurred_at": occurred_at}
