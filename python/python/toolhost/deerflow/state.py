"""``ThreadState`` for a LangGraph graph of your own that runs the door's tools: DeerFlow's
state fields that the tools update, with DeerFlow's reducers (``toolhost.reducers``). Inside
DeerFlow, DeerFlow's own ``ThreadState`` is used and this module is not needed."""

from __future__ import annotations

from typing import Annotated, Any

from langgraph.graph.message import add_messages
from typing_extensions import NotRequired, TypedDict

from toolhost.reducers import (
    merge_artifacts,
    merge_delegations,
    merge_goal,
    merge_promoted,
    merge_skill_context,
    merge_todos,
    merge_viewed_images,
)


class ThreadState(TypedDict):
    messages: Annotated[list, add_messages]
    thread_data: NotRequired[dict | None]
    title: NotRequired[str | None]
    artifacts: Annotated[list[str], merge_artifacts]
    todos: Annotated[list | None, merge_todos]
    goal: Annotated[dict | None, merge_goal]
    uploaded_files: NotRequired[list[dict] | None]
    viewed_images: Annotated[dict[str, Any], merge_viewed_images]
    promoted: Annotated[dict | None, merge_promoted]
    delegations: Annotated[list, merge_delegations]
    skill_context: Annotated[list, merge_skill_context]
