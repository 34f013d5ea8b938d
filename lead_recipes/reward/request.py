"""A `POST /get_reward` body of `lead-recipes serve`: its model, the envelope checks that answer 422, and the texts
graded from it (the response alone, the prompt stripped only from a `query` that starts with it). A bad sample is
not the envelope's concern: it is graded `error`. See docs/grading.md#what-query-holds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from lead_recipes.reward.reward_func import response_text

SHAPES = (
    "{'responses': [str], 'prompts': [str] (optional), 'labels': [any]} or "
    "{'query': [str] (prompt + response, or the response alone), 'prompts': [str], 'labels': [any]}"
)


class RewardRequest(BaseModel):
    """The envelope only: sample contents are checked per sample (a bad sample is graded `error`, not a 4xx)."""

    model_config = ConfigDict(extra="ignore")
    query: list[Any] | None = None
    responses: list[Any] | None = None
    prompts: list[Any] | None = None
    labels: list[Any] | None = None


class RequestError(ValueError):
    """A body that is not a reward request (HTTP 422); the message names what is wrong and the shapes taken."""


def parse_request(body: Any) -> RewardRequest:
    """The request in `body` (parsed JSON), its lists of one length; RequestError otherwise."""
    try:
        req = RewardRequest.model_validate(body)
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(map(str, x['loc'])) or 'body'}: {x['msg']}" for x in e.errors()[:5])
        raise RequestError(f"expected {SHAPES}: {errs}") from None
    if req.query is None and req.responses is None:
        raise RequestError(f"`query` or `responses` is required: expected {SHAPES}")
    first = "responses" if req.responses is not None else "query"
    n = len(getattr(req, first))
    for name, lst in (("query", req.query), ("prompts", req.prompts), ("labels", req.labels)):
        if lst is not None and len(lst) != n:
            raise RequestError(f"`{name}` has {len(lst)} items but `{first}` has {n}")
    if req.labels is None and n:
        raise RequestError("`labels` (the gold answers) is required")
    return req


def sample_texts(req: RewardRequest) -> list[str]:
    """What is graded: each `responses` item as is when the request has them, else the response inside each `query`
    (`response_text`: the prompt stripped only from a query that starts with it)."""
    if req.responses is not None:
        return [r if isinstance(r, str) else ("" if r is None else str(r)) for r in req.responses]
    prompts = req.prompts or [""] * len(req.query or [])
    return [response_text(q, p) for q, p in zip(req.query or [], prompts)]


def format_texts(req: RewardRequest) -> list[str]:
    """What the format flags are read from (prompt + response, as the authors' code reads them): each `query` as
    sent, or each prompt followed by its `responses` item."""
    if req.responses is None:
        return [q if isinstance(q, str) else "" for q in req.query or []]
    prompts = req.prompts or [""] * len(req.responses)
    return [(p if isinstance(p, str) else "") + t for p, t in zip(prompts, sample_texts(req))]
