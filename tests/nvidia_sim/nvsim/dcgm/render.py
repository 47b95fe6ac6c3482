# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Text layouts of ``dcgmi`` (test double).

The box tables follow the geometry of dcgmi's output classes: a column table
(``discovery -l``), a two-column tree (``health``) and the diagnostic result
table, plus the JSON layout of its JSON writer (tab indentation, sorted keys,
``" : "`` separators).
"""

import json


def hline(widths, char="-"):
    return "+" + "+".join(char * w for w in widths) + "+\n"


# --- column tables (discovery) -----------------------------------------------

def columns(columns_spec, sections, separate_sections=False):
    """columns_spec: [(width, title)]; sections: list of [row, ...], row = [cell, ...].

    The first row of a section is its main line; further rows are overflow
    lines (as the Device Information column uses for Name, PCI Bus ID, UUID).
    """
    widths = [w for w, _unused in columns_spec]
    out = [hline(widths), _column_row(widths, [t for _unused, t in columns_spec]), hline(widths)]
    for number, rows in enumerate(sections):
        if number and separate_sections:
            out.append(hline(widths))
        for row in rows:
            out.append(_column_row(widths, row))
    out.append(hline(widths))
    return "".join(out)


def _column_row(widths, cells):
    parts = []
    for index, (width, cell) in enumerate(zip(widths, cells)):
        parts.append(("| " if index == 0 else " | ") + str(cell).ljust(width - 2))
    return "".join(parts) + " |\n"


# --- trees (health) ----------------------------------------------------------

def tree_label(level, label, overflow=False):
    """Left cell of a tree row: '-> ' right-aligned in level*3 columns."""
    prefix = "" if (level == 0 or overflow) else "-> "
    return prefix.rjust(level * 3) + label


def tree(left, right, rows, header=None):
    """rows: [(left_text, value)] with left_text from tree_label()."""
    full = left + right
    widths = [left - 1, right - 2]
    out = [hline(widths)]
    if header:
        out.append("| " + header.ljust(full - 3) + "|\n")
        out.append(hline(widths, "="))
    for text, value in rows:
        out.append("| " + text.ljust(left - 3) + " | " + str(value).ljust(right - 4) + " |\n")
    out.append(hline(widths))
    return "".join(out)


# --- diagnostic table ------------------------------------------------------------

DIAG_LEFT = 27
DIAG_RIGHT = 48


def _diag_row(label, value):
    return "| " + label.ljust(DIAG_LEFT - 2) + " | " + value.ljust(DIAG_RIGHT - 2) + " |\n"


def _diag_section(title, first):
    label = ("-----  %s  " % title).ljust(DIAG_LEFT, "-")
    edge = "|" if first else "+"
    return edge + label + "+" + "-" * DIAG_RIGHT + edge + "\n"


def _wrap(text, width):
    """Hard wrap at width characters, as dcgmi does for long values."""
    return [text[i:i + width] for i in range(0, len(text), width)] or [""]


def diag_table(metadata, categories):
    """metadata: [(label, value)]; categories: [(name, [test])].

    test = {"name", "status", "gpus": [(gpu_id, status)], "warnings": [text]}
    """
    width = DIAG_RIGHT - 2
    out = ["Successfully ran diagnostic for group.\n",
           hline([DIAG_LEFT, DIAG_RIGHT]),
           _diag_row("Diagnostic", "Result"),
           hline([DIAG_LEFT, DIAG_RIGHT], "=")]
    out.append(_diag_section("Metadata", True))
    for label, value in metadata:
        for number, chunk in enumerate(_wrap(value, width)):
            out.append(_diag_row(label if number == 0 else "", chunk))
    for number, (category, tests) in enumerate(categories):
        out.append(_diag_section(category, number == 0))
        for test in tests:
            out.append(_diag_row(test["name"], test["status"]))
            for warning in test.get("warnings", []):
                for line_no, chunk in enumerate(_wrap(warning, width - 1)):
                    out.append(_diag_row("Warning" if line_no == 0 else "", chunk))
            for gpu_id, status in test["gpus"]:
                out.append(_diag_row("", "GPU%d: %s" % (gpu_id, status)))
    out.append(hline([DIAG_LEFT, DIAG_RIGHT]))
    return "".join(out)


# --- dcgmi's JSON writer ------------------------------------------------------------

def styled_json(value):
    """Tab-indented JSON with sorted keys and ' : ' like dcgmi prints it."""
    return _styled(value, 0) + "\n"


def _styled(value, depth):
    tabs = "\t" * depth
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = []
        for key in sorted(value):
            child = value[key]
            rendered = _styled(child, depth + 1)
            if isinstance(child, (dict, list)) and child:
                items.append("%s\t%s :\n%s\t%s" % (tabs, json.dumps(key), tabs, rendered))
            else:
                items.append("%s\t%s : %s" % (tabs, json.dumps(key), rendered))
        return "{\n" + ",\n".join(items) + "\n" + tabs + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        items = ["%s\t%s" % (tabs, _styled(item, depth + 1)) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + tabs + "]"
    return json.dumps(value)
