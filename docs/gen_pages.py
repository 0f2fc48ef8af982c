"""Pages generated at build time (mkdocs-gen-files), so that they cannot drift from the code:
the command reference from the CLI's argparse parser, the scenario and drill references from
the committed JSON Schemas, the EV state diagram from the EV state table, the architecture
page's code map from the modules' docstrings, and the results page's table columns from their
schema (runcontract/tables.py)."""
from __future__ import annotations

import argparse
import ast
import html
import importlib.util
import json
import os
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import mkdocs_gen_files

from hostagent.compiled import file_of
from hostagent.protocol.ev_states import TRANSITIONS, EVState
from runcontract import tables
from testbed import cli

ROOT = Path(__file__).resolve().parents[1]


def _md(text: str) -> str:
    """Help text (plain, `code` in backticks, as the terminal shows it) as Markdown, also for a
    table's cell: code spans stay as they are (a table leaves a `|` in one alone); elsewhere
    `<utc>` and the like are escaped, not taken for HTML tags, `*` and `_` are text, not
    emphasis, and `|` does not end the cell."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: all of it is text
        parts = [text]
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"`{part}`")
            continue
        part = html.escape(part, quote=False)
        out.append(re.sub(r"([\\`*_\[\]|])", r"\\\1", part))
    return "".join(out)


def _invocation(name: str, sub: argparse.ArgumentParser) -> str:
    """`mrc-testbed NAME` and its positional arguments, as a user types them."""
    words = [f"mrc-testbed {name}"]
    for action in sub._actions:
        if action.option_strings:
            continue
        metavar = str(action.metavar or action.dest)
        words.append({"?": f"[{metavar}]", "+": f"{metavar}...", "*": f"[{metavar}...]"}.get(
            str(action.nargs), metavar))
    return " ".join(words)


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    """A table of the parser's arguments (every one but --help), each with its help text."""
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            metavar = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
            name = ", ".join(f"{o}{metavar}" for o in action.option_strings)
        else:
            name = str(action.metavar or action.dest)
        text = formatter._expand_help(action) if action.help else ""
        rows.append(f"| `{name}` | {_md(text)} |\n")
    return ["| argument | what |\n|---|---|\n", *rows] if rows else []


def _code_map() -> Any:
    """docs/code_map.py, which the unit tests import too (docs/ is no package)."""
    spec = importlib.util.spec_from_file_location("code_map", ROOT / "docs/code_map.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["code_map"] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def commands_page() -> str:
    """The hand-written introduction; an overview of every subcommand; the options and exit
    statuses of `mrc-testbed` itself; then each subcommand: its description, usage and
    arguments. All of it from the CLI's parser (cli.COMMANDS, cli.EXIT_STATUS), so that a new
    subcommand or option appears here, and its help text renders as Markdown."""
    os.environ["COLUMNS"] = "100"  # argparse wraps the usage at the terminal's width
    parser = cli._parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help or "" for c in subs._choices_actions}
    out = [(ROOT / "docs/reference/commands-intro.md").read_text(),
           "\n| command | what |\n|---|---|\n"]
    for name, sub in subs.choices.items():
        out.append(f"| [`{_invocation(name, sub)}`](#mrc-testbed-{name}) | {_md(helps[name])} |\n")
    out += [f"\n{_md(cli.EXIT_STATUS)}\n", "\n## mrc-testbed\n\n",
            f"{_md(parser.description or '')}\n\n",
            f"```text\n{parser.format_usage()}```\n\n", *_arguments(parser)]
    for name, sub in subs.choices.items():
        out += [f"\n## mrc-testbed {name}\n\n{_md(sub.description or helps[name])}\n\n",
                f"```text\n{sub.format_usage()}```\n\n", *_arguments(sub)]
    return "".join(out)


def _type(prop: dict[str, Any]) -> str:
    """A property's type in a word or two: a model's name links to its section."""
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"map of {_type(prop['additionalProperties'])}"
    return str(kind)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _model(name: str, model: dict[str, Any]) -> list[str]:
    out = [f"\n## {name}\n"]
    if model.get("description"):
        out.append(f"\n{model['description']}\n")
    props = model.get("properties")
    if not props:
        return [*out, f"\nType: {_type(model)}.\n"]
    required = set(model.get("required", []))
    out.append("\n| field | type | default | description |\n|---|---|---|---|\n")
    for field, prop in props.items():
        default = ("required" if field in required else
                   f"`{json.dumps(prop['default'])}`" if "default" in prop else "")
        out.append(f"| `{field}` | {_type(prop)} | {_cell(default)} | "
                   f"{_cell(prop.get('description', ''))} |\n")
    return out


def schema_page(kind: str) -> str:
    """Every model of the schema, the file's top level first."""
    file = f"schemas/{kind}.schema.json"
    schema = json.loads((ROOT / file).read_text())
    out = [f"# {kind.capitalize()} file reference\n\n",
           f"Generated from `{file}` (`make schemas` writes it "
           f"from the pydantic models; `mrc-testbed schema{' --drill' if kind == 'drill' else ''}`"
           f" prints it). Shipped files name it on their first line, so editors with the YAML "
           f"language server validate and complete them:\n\n"
           f"```yaml\n# yaml-language-server: $schema=../{file}\n```\n",
           *_model(schema.get("title", kind), schema)]
    for name, model in schema.get("$defs", {}).items():
        out += _model(name, model)
    return "".join(out)


def ev_health_page() -> str:
    """The EV state table as a state diagram (one arrow per change of state, labelled with the
    events that cause it; the events that leave a state as it is listed under it), then the
    table's own docstring: what each event means."""
    edges: dict[tuple[EVState, EVState], list[str]] = defaultdict(list)
    stays: dict[EVState, list[str]] = defaultdict(list)
    for (state, event), to in TRANSITIONS.items():
        (stays[state] if to == state else edges[(state, to)]).append(event.value)
    lines = ["# EV health\n",
             "Every MRC QP keeps a health state per entropy value (EV), the spec's "
             "`mrc_ctl_ev_state`. The diagram is generated from the state table "
             "(`hostagent/protocol/ev_states.py`, `TRANSITIONS`); how the transport observes "
             "each event is in [Transports](../manual/transports.md).\n",
             "```mermaid", "stateDiagram-v2", "    [*] --> GOOD"]
    lines += [f"    {a.value} --> {b.value}: {', '.join(ev)}" for (a, b), ev in edges.items()]
    lines.append("```\n")
    lines += [f"- **{s.value}** stays on {', '.join(f'`{e}`' for e in ev)}." for s, ev in
              stays.items()]
    # from the source: a module compiled by mypyc (`make fast`) keeps no docstring
    source = file_of("protocol.ev_states", ".py").read_text()
    module_doc = ast.get_docstring(ast.parse(source)) or ""
    doc = module_doc.split("\n", 1)[1].strip()
    return "\n".join(lines) + "\n\n## The events\n\n" + doc + "\n"


with mkdocs_gen_files.open("reference/commands.md", "w") as f:
    f.write(commands_page())
for kind in ("scenario", "drill"):
    with mkdocs_gen_files.open(f"reference/{kind}.md", "w") as f:
        f.write(schema_page(kind))
with mkdocs_gen_files.open("design/ev-health.md", "w") as f:
    f.write(ev_health_page())

# The results page as written, with every table's columns from their schema.
results_page = (ROOT / "docs/manual/results.md").read_text()
if tables.MARKER not in results_page:
    raise SystemExit(f"docs/manual/results.md lost its {tables.MARKER} marker")
with mkdocs_gen_files.open("manual/results.md", "w") as f:
    f.write(results_page.replace(tables.MARKER, tables.markdown()))

# The architecture page as written, with its code map made from the code (docs/code_map.py).
code_map = _code_map()
architecture = (ROOT / "docs/design/architecture.md").read_text()
if code_map.CODE_MAP not in architecture:
    raise SystemExit(f"docs/design/architecture.md lost its {code_map.CODE_MAP} marker")
with mkdocs_gen_files.open("design/architecture.md", "w") as f:
    f.write(architecture.replace(code_map.CODE_MAP, code_map.markdown()))
