"""Role READMEs: the variables table is rendered from the role's meta/argument_specs.yml, between two markers, so it
cannot drift from what the role validates. `make role-docs` rewrites the tables; a unit test fails when one is
stale. The text around the markers is written by hand."""

from __future__ import annotations

import os
import sys

import yaml

ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")
BEGIN = "<!-- BEGIN VARIABLES (generated from meta/argument_specs.yml by `make role-docs`) -->"
END = "<!-- END VARIABLES -->"


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def variables_table(role: str) -> str:
    with open(os.path.join(ROLES_DIR, role, "meta", "argument_specs.yml")) as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    lines = ["| Variable | Type | Required | Default | Description |", "|---|---|---|---|---|"]
    for name, option in sorted(options.items()):
        kind = option.get("type", "str") + (f" of {option['elements']}" if "elements" in option else "")
        if "choices" in option:
            kind += " (" + ", ".join(f"`{choice}`" for choice in option["choices"]) + ")"
        default = f"`{_cell(yaml.safe_dump(option['default'], default_flow_style=True).strip().removesuffix('...').strip())}`" \
            if "default" in option else ""
        description = option.get("description", "")
        description = " ".join(description) if isinstance(description, list) else description
        lines.append(f"| `{name}` | {kind} | {'yes' if option.get('required') else ''} | {default} | "
                     f"{_cell(description)} |")
    return "\n".join(lines)


def rendered(role: str) -> tuple[str, str]:
    """(the README as it is, the README with its table regenerated)."""
    with open(os.path.join(ROLES_DIR, role, "README.md")) as handle:
        current = handle.read()
    before = current.partition(BEGIN)[0]
    after = current.partition(BEGIN)[2].partition(END)[2]
    return current, f"{before}{BEGIN}\n{variables_table(role)}\n{END}{after}"


if __name__ == "__main__":
    for name in sorted(os.listdir(ROLES_DIR)):
        current, regenerated = rendered(name)
        if current != regenerated:
            with open(os.path.join(ROLES_DIR, name, "README.md"), "w") as handle:
                handle.write(regenerated)
            print(f"roles/{name}/README.md: variables table updated", file=sys.stderr)
