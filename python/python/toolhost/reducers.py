"""DeerFlow's thread-state reducers, as toolhost merges a call's update (tested against the
reducer vectors DeerFlow produced). Each has DeerFlow's name and signature ``(existing, new)``
and raises what DeerFlow's raises."""

from __future__ import annotations

import json
from typing import Any

from . import _native


def _reduce(field: str, existing: Any, new: Any) -> Any:
    if new is None:
        return existing
    return json.loads(_native.reduce(field, json.dumps(existing), json.dumps(new)))


def merge_artifacts(existing: list[str] | None, new: list[str] | None) -> list[str]:
    return _reduce("artifacts", existing, new) if new is not None else list(existing or [])


def merge_viewed_images(existing: dict | None, new: dict | None) -> dict:
    return _reduce("viewed_images", existing, new) if new is not None else dict(existing or {})


def merge_promoted(existing: dict | None, new: dict | None) -> dict | None:
    return _reduce("promoted", existing, new)


def merge_todos(existing: list | None, new: list | None) -> list | None:
    return _reduce("todos", existing, new)


def merge_goal(existing: dict | None, new: dict | None) -> dict | None:
    return _reduce("goal", existing, new)


def merge_skill_context(existing: list | None, new: list | None) -> list:
    return _reduce("skill_context", existing, new) if new is not None else list(existing or [])


def merge_delegations(existing: list | None, new: list | None) -> list:
    return _reduce("delegations", existing, new) if new is not None else list(existing or [])
