# Regenerates clarification_vectors.json by running DeerFlow's ClarificationMiddleware methods
# (clarification_middleware_excerpt.py) over the cases below: python gen_clarification_vectors.py > clarification_vectors.json
import json, sys
sys.path.insert(0, ".")
from clarification_middleware_excerpt import M
m = M()
long = "x" * 201
cases = [
  ("c1", {"question": "Which file?", "clarification_type": "missing_info"}),
  ("c2", {"question": "Pick", "clarification_type": "approach_choice", "context": "Two ways", "options": "[\" <b>Fast</b> \", \"Safe\", \"\", \"Fast\", 3, 1.5, true, null]"}),
  ("", {"question": "Q?"}),
  ("c3", {"question": None, "clarification_type": None, "context": None}),
  ("c4", {"question": "Q", "clarification_type": "odd", "context": 0, "options": {"a": [{"v": "x"}, "y", None, True, 2]}}),
  ("c5", {"question": "Deploy", "clarification_type": "risk_confirmation", "options": ["ignored"], "fields": [
      {"name": " env ", "label": " Environment ", "type": "select", "options": ["prod", "<i>staging</i>", "prod"], "required": "TRUE "},
      {"name": "tags", "type": "multi_select", "options": "[\"a\", \"b\"]", "required": 1},
      {"name": "note", "type": ["weird"], "placeholder": "  why  ", "required": "yes"},
      {"name": "kind", "type": "select"},
      {"name": "n", "type": "number", "options": ["ignored"], "required": 0.0}]}),
  ("c6", {"question": "Q", "clarification_type": "suggestion", "fields": "[{\"name\": \"a\"}]"}),
  ("c7", {"question": "Q", "fields": [{"name": "constructor"}], "options": ["A", "B"]}),
  ("c8", {"question": "Q", "fields": [{"name": "a"}, {"name": "a"}]}),
  ("c9", {"question": "Q", "fields": [{"name": long}]}),
  ("c10", {"question": "Q", "fields": [{"name": f"f{i}"} for i in range(17)]}),
  ("c11", {"question": "Q", "fields": [{"name": "a", "type": "select", "options": [f"o{i}" for i in range(25)]}]}),
  ("c12", {"question": "Q", "fields": [{"name": f"f{i}", "label": "l"*200, "placeholder": "p"*200, "type": "select", "options": ["y"*200, "z"*200]} for i in range(16)]}),
  ("c13", {"question": "Q", "fields": [{"name": "a", "placeholder": long}]}),
  ("c14", {"question": "Q", "fields": "not json", "options": "plain text option"}),
  ("c15", {"question": "多行\n问题", "clarification_type": "ambiguous_requirement", "context": "背景", "options": ["是", "否", "  "]}),
  ("c16", {"question": "Q", "fields": [{"name": "a", "label": 5, "type": "checkbox", "required": None}]}),
]
out = [{"tool_call_id": t, "args": a, "expected": m.handle(t, a)} for t, a in cases]
print(json.dumps({"description": "ClarificationMiddleware output (message id, content, artifact) for ask_clarification args, produced by running DeerFlow's own normalisation/formatting methods (clarification_middleware.py at bytedance/deer-flow f1f4af99-era) under Python 3.11.", "cases": out}, ensure_ascii=False, indent=1))
