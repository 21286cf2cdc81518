"""The `__TOOL__` tool: greets someone. Build with `toolhost build`, try it with
`toolhost call __TOOL__ '{"name": "Ada"}'`."""

from typing import Annotated

from toolhost_sdk import Context, tool


@tool
def __TOOL__(ctx: Context, name: Annotated[str, "Who to greet."], excited: Annotated[bool, "Greet loudly."] = False) -> str:
    """Greet someone by name."""
    if not name.strip():
        # Reported as DeerFlow reports a raised exception: `ValueError: name must not be empty`.
        raise ValueError("name must not be empty")
    greeting = ctx.config.get("greeting", "Hello")
    return f"{greeting}, {name}{'!' if excited else '.'}"


# The component's export: keep this import after the tools.
from toolhost_sdk import Tool  # noqa: E402,F401
