# Regenerates tool_specs.json: the model-visible name, description and JSON schema of each
# builtin, produced by LangChain itself (langchain-core 1.8.3, pydantic 2.14.4) from the tool
# signatures and docstrings of bytedance/deer-flow@f1f4af99 (write_todos: DeerFlow's
# TodoMiddleware description in write_todos_description.txt). Injected parameters (runtime,
# tool_call_id) are left out as LangChain hides them; task's `-> str | Command` is written `-> str`.
# Run: python gen_tool_specs.py > tool_specs.json (from this directory).
import json
from typing import Annotated, Any, Literal
from langchain_core.tools import tool, InjectedToolCallId, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_function
from typing_extensions import TypedDict

@tool("present_files", parse_docstring=True)
def present_file_tool(
    filepaths: list[str],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> str:
    """Make files visible to the user for viewing and rendering in the client interface.

    When to use the present_files tool:

    - Making any file available for the user to view, download, or interact with
    - Presenting multiple related files at once
    - After creating files that should be presented to the user

    When NOT to use the present_files tool:
    - When you only need to read file contents for your own processing
    - For temporary or intermediate files not meant for user viewing

    Notes:
    - You should call this tool after creating files and moving them to the `/mnt/user-data/outputs` directory.
    - This tool can be safely called in parallel with other tools. State updates are handled by a reducer to prevent conflicts.

    Args:
        filepaths: List of absolute file paths to present to the user. **Only** files in `/mnt/user-data/outputs` can be presented.
    """
    return ""

@tool("ask_clarification", parse_docstring=True, return_direct=True)
def ask_clarification_tool(
    question: str,
    clarification_type: Literal[
        "missing_info",
        "ambiguous_requirement",
        "approach_choice",
        "risk_confirmation",
        "suggestion",
    ],
    context: str | None = None,
    options: list[str] | None = None,
    fields: list[dict[str, Any]] | None = None,
) -> str:
    """Ask the user for clarification when you need more information to proceed.

    Use this tool when you encounter situations where you cannot proceed without user input:

    - **Missing information**: Required details not provided (e.g., file paths, URLs, specific requirements)
    - **Ambiguous requirements**: Multiple valid interpretations exist
    - **Approach choices**: Several valid approaches exist and you need user preference
    - **Risky operations**: Destructive actions that need explicit confirmation (e.g., deleting files, modifying production)
    - **Suggestions**: You have a recommendation but want user approval before proceeding

    The execution will be interrupted and the question will be presented to the user.
    Wait for the user's response before continuing.

    When to use ask_clarification:
    - You need information that wasn't provided in the user's request
    - The requirement can be interpreted in multiple ways
    - Multiple valid implementation approaches exist
    - You're about to perform a potentially dangerous operation
    - You have a recommendation but need user approval

    Choosing the interaction shape:
    - One open question -> just `question` (free text input)
    - Pick exactly one option -> `options`
    - Pick several options -> a single `fields` entry of type `multi_select`
    - Collect several values at once (e.g. a set of parameters for one action) ->
      `fields`, which renders a single structured form instead of several
      sequential questions. Prefer one form over asking field-by-field.

    Best practices:
    - Ask ONE clarification at a time for clarity; a form with several fields
      still counts as one clarification
    - Be specific and clear in your question
    - Don't make assumptions when clarification is needed
    - For risky operations, ALWAYS ask for confirmation
    - If a skill provides a predefined field template, pass it through `fields`
      unchanged instead of redesigning it
    - After calling this tool, execution will be interrupted automatically

    Args:
        question: The clarification question to ask the user. Be specific and clear.
        clarification_type: The type of clarification needed (missing_info, ambiguous_requirement, approach_choice, risk_confirmation, suggestion).
        context: Optional context explaining why clarification is needed. Helps the user understand the situation.
        options: Optional list of choices (for approach_choice or suggestion types). Present clear options for the user to choose from.
        fields: Optional form field definitions for collecting multiple values in one card; takes precedence over `options`.
            Each field is an object with `name` (unique identifier, required), `label` (display text, defaults to name),
            `type` (one of: text, textarea, number, select, multi_select, checkbox, date; defaults to text),
            `required` (boolean, defaults to false), `options` (list of strings, required for select/multi_select types),
            and `placeholder` (optional hint text).
    """
    return "Clarification request processed by middleware"

def _view_image(
    image_path: str,
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> str:
    """Read an image file.

    Use this tool to read an image file and make it available for display.

    When to use the view_image tool:
    - When you need to view an image file.

    When NOT to use the view_image tool:
    - For non-image files (use present_files instead)
    - For multiple files at once (use present_files instead)

    Args:
        image_path: Absolute /mnt/user-data virtual path to the image file. Common formats supported: jpg, jpeg, png, webp, gif.
    """
    return ""
view_image_tool = StructuredTool.from_function(func=_view_image, name="view_image", parse_docstring=True)

@tool
def list_uploaded_files(
    include_outline: Annotated[
        bool | list[str],
        "Control which files get their document outline (headings/preview) returned. "
        "False (default): no outline for any file — just filename, size, and path. "
        "True: include outline/preview for every .md-convertible file. "
        'list of filenames: include outline/preview only for those specific files (e.g. ["report.md", "data.csv"]).',
    ] = False,
    max_results: Annotated[
        int,
        "Maximum number of files to return (default 20, max 100).",
    ] = 20,
) -> dict:
    """Discover historical uploaded files available in this thread.

    Returns files that were uploaded in PREVIOUS turns — files uploaded in the
    current run are excluded (they are already listed in <current_uploads>).

    Use this tool when:
    - The user refers to previously uploaded files without naming them (e.g. "analyze those PDFs I uploaded before")
    - You need to check what files are available in this thread
    - You are starting work on a thread and want an overview of available data

    Skip this tool when:
    - The user names a specific file — use read_file or grep directly with the path
    - The file was uploaded in the current run — it's already in <current_uploads>
    """
    return {}

@tool(parse_docstring=True)
def setup_agent(
    soul: str,
    description: str,
    skills: list[str] | None = None,
) -> str:
    """Setup the custom DeerFlow agent.

    Args:
        soul: Full SOUL.md content defining the agent's personality and behavior.
        description: One-line description of what the agent does.
        skills: Optional list of skill names this agent should use. None means use all enabled skills, empty list means no skills.
    """
    return ""

from pydantic import BeforeValidator
OptionalText = Annotated[str | None, BeforeValidator(lambda v: v)]
OptionalStringList = Annotated[list[str] | None, BeforeValidator(lambda v: v)]

@tool(parse_docstring=True)
def update_agent(
    soul: OptionalText = None,
    description: OptionalText = None,
    skills: OptionalStringList = None,
    tool_groups: OptionalStringList = None,
    model: OptionalText = None,
) -> str:
    """Persist updates to the current custom agent's SOUL.md and config.yaml.

    Use this when the user asks to refine the agent's identity, description,
    skill whitelist, tool-group whitelist, or default model. Only the fields
    you explicitly pass are updated; omitted fields keep their existing values.

    Pass ``soul`` as the FULL replacement SOUL.md content — there is no patch
    semantics, so always start from the current SOUL and apply your edits.

    Pass ``skills=[]`` to disable all skills for this agent. Omit ``skills``
    entirely to keep the existing whitelist. Do not pass literal strings like
    ``"null"`` / ``"none"`` / ``"undefined"`` for unchanged fields; omit those
    fields instead.

    Args:
        soul: Optional full replacement SOUL.md content.
        description: Optional new one-line description.
        skills: Optional skill whitelist. ``[]`` = no skills, omit = unchanged.
        tool_groups: Optional tool-group whitelist. ``[]`` = empty, omit = unchanged.
        model: Optional model override (must match a configured model name).

    Returns:
        Command with a ToolMessage describing the result. Changes take effect
        on the next user turn (when the lead agent is rebuilt with the fresh
        SOUL.md and config.yaml).
    """
    return ""

@tool("task", parse_docstring=True)
def task_tool(
    description: str,
    prompt: str,
    subagent_type: str,
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> str:
    """Delegate a bounded task to a specialized subagent in its own context.

    Delegate only when expected benefit clearly exceeds delegation overhead.
    Useful benefits are:
    - Material wall-clock savings from independent parallel work
    - Specialist tools, skills, models, or domain instructions
    - Context isolation for a bounded, unusually context-heavy investigation

    Built-in subagent types:
    - **general-purpose**: A capable agent for bounded exploration and action. Use
      when the assignment has clear specialist or context-isolation benefit, or is
      one of several independent, non-overlapping tasks that can actually run in
      parallel.
    - **bash**: Command execution specialist for running bash commands. This is only
      available when host bash is explicitly allowed or when using an isolated shell
      sandbox such as `AioSandboxProvider`. Use it only for a bounded shell workflow
      with clear context-isolation or independent-parallel benefit.
      Routine git, build, test, or deploy operations are not sufficient reason to delegate.

    Additional custom subagent types may be defined in config.yaml under
    `subagents.custom_agents`. Each custom type can have its own system prompt,
    tools, skills, model, and timeout configuration. If an unknown subagent_type
    is provided, the error message will list all available types.

    When to use this tool:
    - Independent tasks that materially reduce wall-clock time when run in parallel
    - A specialist subagent provides capability unavailable on the direct path
    - Bounded exploration that would otherwise displace important parent context

    When NOT to use this tool:
    - Merely because a task is complex, multi-step, verbose, or touches a large repo
    - Splitting dependent steps across parallel subagents; keep the chain together
      and delegate it as one bounded task only when specialist or context-isolation
      benefit clearly wins
    - Parallel work with overlapping files, shared mutable state, or external side effects
    - Tasks requiring user interaction or clarification

    Costs to include in the delegation decision:
    - Repeating the same repository discovery in multiple contexts
    - Coordination, verification, and synthesis of returned results
    - Any task the parent can complete more cheaply with direct tools

    Args:
        description: A short (3-5 word) description of the task for logging/display. ALWAYS PROVIDE THIS PARAMETER FIRST.
        prompt: The task description for the subagent. Be specific and clear about what needs to be done. ALWAYS PROVIDE THIS PARAMETER SECOND.
        subagent_type: The type of subagent to use. ALWAYS PROVIDE THIS PARAMETER THIRD.
    """
    return ""

class Todo(TypedDict):
    """A single todo item with content and status."""

    content: str
    """The content/description of the todo item."""

    status: Literal["pending", "in_progress", "completed"]
    """The current status of the todo item."""

TODO_DESC = open("write_todos_description.txt").read()
@tool(description=TODO_DESC)
def write_todos(todos: list[Todo], tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Create and manage a structured task list for your current work session."""
    return ""

out = {}
for t in [present_file_tool, ask_clarification_tool, view_image_tool, list_uploaded_files, setup_agent, update_agent, write_todos, task_tool]:
    f = convert_to_openai_function(t)
    out[f["name"]] = {"description": f["description"], "parameters": f["parameters"]}
print(json.dumps(out, indent=2, ensure_ascii=False))
