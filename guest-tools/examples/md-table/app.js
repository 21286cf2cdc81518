// md-table: format rows as a Markdown table, in JavaScript.
// Build with `toolhost build guest-tools/examples/md-table`. Rows come inline or from a JSON / CSV
// file in the thread's files (`capabilities.filesystem: user-data`, see config.yaml here).
import { defineTool, exportTools, readTextFile } from "./toolhost-sdk.js";

const cell = (v) =>
  v === null || v === undefined ? "" : (typeof v === "object" ? JSON.stringify(v) : String(v)).replace(/\|/g, "\\|").replace(/\r?\n/g, "<br>");

const isNumber = (s) => s !== "" && /^[-+]?(\d[\d,]*)(\.\d+)?([eE][-+]?\d+)?%?$/.test(s);

// Display width: code points, not UTF-16 units.
const width = (s) => [...s].length;

function parseCsv(text) {
  const rows = [];
  let row = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (field += '"'), i++;
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") row.push(field), (field = "");
    else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      row.push(field), rows.push(row), (row = []), (field = "");
    } else field += c;
  }
  if (field !== "" || row.length) row.push(field), rows.push(row);
  return rows.filter((r) => r.some((f) => f !== ""));
}

function fromFile(path) {
  const text = readTextFile(path);
  if (path.toLowerCase().endsWith(".json")) return JSON.parse(text);
  const [head, ...rest] = parseCsv(text);
  if (!head) throw new RangeError(`${path} has no rows`);
  return rest.map((r) => Object.fromEntries(head.map((h, i) => [h, r[i] ?? ""])));
}

const markdownTable = defineTool({
  name: "markdown_table",
  description:
    "Format rows as a Markdown table with aligned columns. Rows are objects (keys become columns) or arrays " +
    "(give `columns`); or read them from a .json or .csv file in the thread's files.",
  parameters: {
    type: "object",
    properties: {
      rows: { type: "array", description: "The rows: objects, or arrays of cells.", items: { type: ["object", "array"] } },
      file: { type: "string", description: "Read the rows from this .json or .csv file instead, e.g. /mnt/user-data/uploads/x.csv." },
      columns: { type: "array", items: { type: "string" }, description: "Column order and headers (default: the keys in order of appearance)." },
      align: {
        type: "object",
        additionalProperties: { enum: ["left", "right", "center"] },
        description: "Alignment per column (default: right for numeric columns, left otherwise).",
      },
    },
    additionalProperties: false,
  },
  run(ctx, { rows, file, columns, align = {} }) {
    if ((rows === undefined) === (file === undefined)) throw new TypeError("give exactly one of `rows` and `file`");
    const data = file !== undefined ? fromFile(file) : rows;
    if (!Array.isArray(data) || data.length === 0) throw new RangeError("there are no rows to format");
    let cols = columns;
    if (!cols) {
      if (data.some(Array.isArray)) {
        const n = Math.max(...data.map((r) => (Array.isArray(r) ? r.length : 0)));
        cols = Array.from({ length: n }, (_, i) => `column ${i + 1}`);
      } else {
        cols = [];
        for (const r of data) for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k);
      }
    }
    const body = data.map((r) => cols.map((c, i) => cell(Array.isArray(r) ? r[i] : r[c])));
    const head = cols.map(cell);
    const widths = cols.map((_, i) => Math.max(3, width(head[i]), ...body.map((r) => width(r[i]))));
    const how = cols.map((c, i) => align[c] ?? (body.every((r) => r[i] === "" || isNumber(r[i])) && body.some((r) => r[i] !== "") ? "right" : "left"));
    const pad = (s, i) => {
      const gap = widths[i] - width(s);
      if (how[i] === "right") return " ".repeat(gap) + s;
      if (how[i] === "center") return " ".repeat(gap >> 1) + s + " ".repeat(gap - (gap >> 1));
      return s + " ".repeat(gap);
    };
    const line = (cells) => `| ${cells.map(pad).join(" | ")} |`;
    const rule = how.map((h, i) => {
      const w = widths[i];
      if (h === "right") return "-".repeat(w - 1) + ":";
      if (h === "center") return ":" + "-".repeat(w - 2) + ":";
      return "-".repeat(w);
    });
    return [line(head), `| ${rule.join(" | ")} |`, ...body.map(line)].join("\n");
  },
});

// The component's export.
export const tool = exportTools([markdownTable]);
