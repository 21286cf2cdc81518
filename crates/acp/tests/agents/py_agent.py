"""A small ACP agent on the Python SDK (PyPI agent-client-protocol, `import acp`) that the
toolhost-acp tests spawn as a real subprocess. argv[1] picks the behaviour; every mode answers
the ACP handshake the way a real agent does and only differs in what `session/prompt` does.
"""

import asyncio
import os
import sys
import uuid

from acp import PROTOCOL_VERSION, run_agent, text_block, update_agent_message, update_agent_thought
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
)

MODE = sys.argv[1] if len(sys.argv) > 1 else "echo"


class TestAgent:
    def on_connect(self, conn):
        self.conn = conn
        self.client_info = None
        self.cwd = None
        self.mcp = []
        self.meta = None

    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kw):
        self.client_info = client_info
        self.protocol_version = protocol_version
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="py-test-agent", version="0.1"),
        )

    async def new_session(self, cwd, mcp_servers=None, **kw):
        self.cwd = cwd
        self.mcp = mcp_servers or []
        self.meta = kw.get("field_meta") or kw
        return NewSessionResponse(session_id=uuid.uuid4().hex)

    async def say(self, session_id, text):
        await self.conn.session_update(session_id, update_agent_message(text_block(text)))

    async def prompt(self, session_id, prompt, **kw):
        text = "".join(getattr(b, "text", "") or "" for b in prompt)
        if MODE == "echo":
            # Writes into its cwd (the thread's acp-workspace) and names the file by absolute path.
            path = os.path.join(os.getcwd(), "echo.txt")
            with open(path, "w") as f:
                f.write(text)
            await self.conn.session_update(session_id, update_agent_thought(text_block("thinking")))
            await self.say(session_id, "echo: " + text)
            await self.say(session_id, "\nwrote " + path)
        elif MODE == "handshake":
            ci = self.client_info
            names = ",".join(s.name for s in self.mcp)
            model = (self.meta or {}).get("model")
            await self.say(
                session_id,
                f"protocol={self.protocol_version} client={ci.name}/{ci.title}/{ci.version} "
                f"session_cwd_is_process_cwd={os.path.realpath(self.cwd) == os.path.realpath(os.getcwd())} "
                f"mcp=[{names}] model={model} env_TOKEN={os.environ.get('TOKEN')!r} "
                f"env_MISSING={os.environ.get('MISSING')!r} env_LITERAL={os.environ.get('LITERAL')!r} "
                f"inherits_SECRET={'TOOLHOST_ACP_TEST_SECRET' in os.environ}",
            )
        elif MODE == "permission":
            resp = await self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id="call-1", title="write permitted.txt", kind="edit"),
                options=[
                    PermissionOption(option_id="always", name="Always allow", kind="allow_always"),
                    PermissionOption(option_id="once", name="Allow once", kind="allow_once"),
                    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
                ],
            )
            outcome = resp.outcome
            if outcome.outcome == "selected":
                with open("permitted.txt", "w") as f:
                    f.write(text)
                await self.say(session_id, f"permission selected {outcome.option_id}")
            else:
                await self.say(session_id, f"permission {outcome.outcome}")
        elif MODE == "silent":
            pass
        elif MODE == "hang":
            # A grandchild in the same process group: the tool must kill the whole group.
            child = await asyncio.create_subprocess_exec("sleep", "300")
            with open("hang.pid", "w") as f:
                f.write(f"{os.getpid()} {child.pid}")
            await self.say(session_id, "started")
            await asyncio.sleep(3600)
        elif MODE == "fail":
            raise RuntimeError("prompt exploded")
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id, **kw):
        pass


if MODE == "exit":
    sys.stderr.write("fatal: no credentials configured\n")
    sys.exit(3)
if MODE == "garbage":
    sys.stdout.write("this is not json-rpc\n{\"also\": \"not a message\"\n")
    sys.stdout.flush()
    sys.stdin.read()
    sys.exit(0)

asyncio.run(run_agent(TestAgent()))
