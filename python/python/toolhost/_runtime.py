"""The LangGraph runtime, read as DeerFlow's tools read it (no LangChain import needed)."""

from __future__ import annotations

from typing import Any, Mapping


def thread_id_of(runtime: Any) -> str | None:
    """``runtime.context["thread_id"]``, else ``runtime.config["configurable"]["thread_id"]``
    (DeerFlow's ``ensure_sandbox_initialized``); ``None`` when neither names one."""
    if runtime is None:
        return None
    context = getattr(runtime, "context", None)
    thread_id = context.get("thread_id") if isinstance(context, Mapping) else None
    if not thread_id:
        config = getattr(runtime, "config", None)
        configurable = config.get("configurable") if isinstance(config, Mapping) else None
        thread_id = configurable.get("thread_id") if isinstance(configurable, Mapping) else None
    return str(thread_id) if thread_id else None
