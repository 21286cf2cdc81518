// The `__TOOL__` tool: greets someone. Build with `toolhost build`, try it with
// `toolhost call __TOOL__ '{"name": "Ada"}'`.
import { defineTool, exportTools } from "./toolhost-sdk.js";

const __TOOL__ = defineTool({
  name: "__TOOL__",
  description: "Greet someone by name.",
  // The JSON Schema the model sees; arguments are checked against it before run() is called.
  parameters: {
    type: "object",
    properties: {
      name: { type: "string", description: "Who to greet." },
      excited: { type: "boolean", description: "Greet loudly." },
    },
    required: ["name"],
    additionalProperties: false,
  },
  run(ctx, { name, excited = false }) {
    // Reported as DeerFlow reports a raised exception: `RangeError: name must not be empty`.
    if (!name.trim()) throw new RangeError("name must not be empty");
    return `${ctx.config.greeting ?? "Hello"}, ${name}${excited ? "!" : "."}`;
  },
});

// The component's export.
export const tool = exportTools([__TOOL__]);
