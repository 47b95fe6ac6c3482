# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Minimal YAML for the simulated NVIDIA tools (test double; stdlib only).

``dump`` writes block YAML in the layout of the Go YAML library that
``nvidia-ctk cdi generate`` uses (mapping order kept, four-space indentation,
sequence items indented under their key).  ``load`` reads the block subset
that CDI specs and Prometheus web-config files use: nested mappings,
sequences, flow sequences of scalars and plain or quoted scalars.
"""

import json
import re


class YamlError(ValueError):
    pass


# --- writing ------------------------------------------------------------------

_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"}
_INDICATORS = set("?:,[]{}#&*!|>'\"%@`")
_NUMBER = re.compile(r"^[+-]?(\d[\d_]*|\d*\.\d+|\d+\.\d*)([eE][+-]?\d+)?$|^0x[0-9a-fA-F]+$|^[+-]?\.(inf|nan)$")


def _needs_quotes(text):
    if not text or text != text.strip() or "\n" in text:
        return True
    if text.lower() in _RESERVED or _NUMBER.match(text):
        return True
    if text[0] in _INDICATORS or text.startswith("- ") or text == "-":
        return True
    return ": " in text or " #" in text or text.endswith(":")


def _scalar(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    return json.dumps(text) if _needs_quotes(text) else text


def dump(data, indent=4, document_start=True):
    lines = ["---"] if document_start else []
    if isinstance(data, dict):
        _dump_mapping(data, 0, indent, indent, lines)
    elif isinstance(data, list):
        _dump_sequence(data, 0, indent, lines)
    else:
        lines.append(_scalar(data))
    return "\n".join(lines) + "\n"


def _empty_or_scalar(value):
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def _dump_mapping(node, key_col, child_col, step, lines):
    """Keys at key_col; a key's block value starts at child_col.

    Inside a sequence item the keys sit two columns after the dash while their
    children are indented from the dash, which is how the Go library lays it out.
    """
    pad = " " * key_col
    for key, value in node.items():
        if isinstance(value, dict) and value:
            lines.append("%s%s:" % (pad, _scalar(key)))
            _dump_mapping(value, child_col, child_col + step, step, lines)
        elif isinstance(value, list) and value:
            lines.append("%s%s:" % (pad, _scalar(key)))
            _dump_sequence(value, child_col, step, lines)
        else:
            lines.append("%s%s: %s" % (pad, _scalar(key), _empty_or_scalar(value)))


def _dump_sequence(items, level, step, lines):
    pad = " " * level
    for item in items:
        if isinstance(item, dict) and item:
            sub = []
            _dump_mapping(item, level + 2, level + step, step, sub)
            sub[0] = pad + "- " + sub[0][level + 2:]
            lines.extend(sub)
        elif isinstance(item, list) and item:
            sub = []
            _dump_sequence(item, level + 2, step, sub)
            sub[0] = pad + "- " + sub[0][level + 2:]
            lines.extend(sub)
        else:
            lines.append("%s- %s" % (pad, _empty_or_scalar(item)))


# --- reading ------------------------------------------------------------------

def load(text):
    lines = []
    for raw in text.splitlines():
        stripped = _strip_comment(raw).rstrip()
        if not stripped.strip() or stripped.strip() in ("---", "..."):
            continue
        lines.append((len(stripped) - len(stripped.lstrip(" ")), stripped.strip()))
    if not lines:
        return None
    value, index = _parse_block(lines, 0, lines[0][0])
    if index != len(lines):
        raise YamlError("unexpected content: %r" % lines[index][1])
    return value


def _strip_comment(line):
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in ("'", '"'):
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _parse_block(lines, index, indent):
    if lines[index][1].startswith("- ") or lines[index][1] == "-":
        return _parse_sequence(lines, index, indent)
    return _parse_mapping(lines, index, indent)


def _parse_sequence(lines, index, indent):
    items = []
    while index < len(lines) and lines[index][0] == indent and (
            lines[index][1].startswith("- ") or lines[index][1] == "-"):
        rest = lines[index][1][2:].strip() if lines[index][1] != "-" else ""
        if not rest:
            index += 1
            if index < len(lines) and lines[index][0] > indent:
                value, index = _parse_block(lines, index, lines[index][0])
            else:
                value = None
            items.append(value)
            continue
        inner = indent + 2 + (len(lines[index][1][2:]) - len(lines[index][1][2:].lstrip(" ")))
        if _split_key(rest) is not None:
            # A mapping that starts on the dash line: re-read it as a block.
            lines[index] = (inner, rest)
            value, index = _parse_mapping(lines, index, inner)
        else:
            value = _parse_scalar(rest)
            index += 1
        items.append(value)
    return items, index


def _split_key(text):
    if text.startswith(("'", '"')):
        quote = text[0]
        end = text.find(quote, 1)
        if end > 0 and text[end + 1:end + 2] == ":" and text[end + 2:end + 3] in ("", " "):
            return text[1:end], text[end + 2:].strip()
        return None
    match = re.match(r"^([^:\[\]{}]+?):(\s+(.*))?$", text)
    if not match:
        return None
    return match.group(1).strip(), (match.group(3) or "").strip()


def _parse_mapping(lines, index, indent):
    mapping = {}
    while index < len(lines) and lines[index][0] == indent:
        split = _split_key(lines[index][1])
        if split is None:
            raise YamlError("expected a mapping entry: %r" % lines[index][1])
        key, rest = split
        index += 1
        if rest:
            mapping[key] = _parse_scalar(rest)
        elif index < len(lines) and (lines[index][0] > indent or (
                lines[index][0] == indent and lines[index][1].startswith("- "))):
            mapping[key], index = _parse_block(lines, index, lines[index][0])
        else:
            mapping[key] = None
    if index < len(lines) and lines[index][0] > indent:
        raise YamlError("bad indentation: %r" % lines[index][1])
    return mapping, index


def _parse_scalar(text):
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [_parse_scalar(part.strip()) for part in _split_flow(inner)] if inner else []
    if text == "{}":
        return {}
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        return json.loads(text)
    if text.startswith("'") and text.endswith("'") and len(text) >= 2:
        return text[1:-1].replace("''", "'")
    lowered = text.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("null", "~"):
        return None
    if re.match(r"^[+-]?\d+$", text):
        return int(text)
    if re.match(r"^[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?$", text):
        return float(text)
    return text


def _split_flow(text):
    parts, quote, start = [], None, 0
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = None
        elif c in ("'", '"'):
            quote = c
        elif c == ",":
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]
