# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small TOML reader/writer for the simulated NVIDIA tools (test double).

Python >= 3.11 reads TOML with ``tomllib``; the containers the simulator runs
in also carry Python 3.9 and 3.10, so a parser for the subset that container
runtime configs use is included.  ``dumps`` writes the layout of the Go TOML
library used by ``nvidia-ctk`` (sorted keys, plain keys before sub-tables,
two spaces of indentation per table level) so generated files look like the
real ones.  ``set_value`` and ``set_top_level`` edit a document in place,
keeping every other byte, for the commands that must not disturb a user's
file.
"""

import re

try:  # pragma: no cover - depends on the interpreter
    import tomllib as _tomllib
except ImportError:  # pragma: no cover
    _tomllib = None


class TomlError(ValueError):
    pass


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


# --- reading ------------------------------------------------------------------

def loads(text):
    if _tomllib is not None:
        try:
            return _tomllib.loads(text)
        except _tomllib.TOMLDecodeError as exc:
            raise TomlError(str(exc))
    return _Parser(text).parse()


class _Parser(object):
    """Recursive-descent parser for the TOML subset of runtime config files."""

    def __init__(self, text):
        self.s = text
        self.i = 0
        self.root = {}
        self.defined = set()

    def error(self, message):
        line = self.s.count("\n", 0, self.i) + 1
        raise TomlError("%s (line %d)" % (message, line))

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip_ws(self):
        while self.peek() in (" ", "\t"):
            self.i += 1

    def skip_ws_comments_newlines(self):
        while True:
            c = self.peek()
            if c in (" ", "\t", "\r", "\n"):
                self.i += 1
            elif c == "#":
                while self.peek() not in ("\n", ""):
                    self.i += 1
            else:
                return

    def end_of_line(self):
        self.skip_ws()
        if self.peek() == "#":
            while self.peek() not in ("\n", ""):
                self.i += 1
        if self.peek() == "\r":
            self.i += 1
        if self.peek() not in ("\n", ""):
            self.error("expected end of line")
        if self.peek() == "\n":
            self.i += 1

    def parse(self):
        current = self.root
        while True:
            self.skip_ws_comments_newlines()
            if self.i >= len(self.s):
                return self.root
            if self.s.startswith("[[", self.i):
                self.i += 2
                path = self.key_path("]]")
                self.i += 2
                self.end_of_line()
                parent = self.table_at(path[:-1])
                array = parent.setdefault(path[-1], [])
                if not isinstance(array, list):
                    self.error("key %r is not an array of tables" % path[-1])
                current = {}
                array.append(current)
            elif self.peek() == "[":
                self.i += 1
                path = self.key_path("]")
                self.i += 1
                self.end_of_line()
                if tuple(path) in self.defined:
                    self.error("table %s defined twice" % ".".join(path))
                self.defined.add(tuple(path))
                current = self.table_at(path)
            else:
                self.key_value(current)
                self.end_of_line()

    def table_at(self, path):
        table = self.root
        for part in path:
            value = table.setdefault(part, {})
            if isinstance(value, list):
                value = value[-1]
            if not isinstance(value, dict):
                self.error("key %r is not a table" % part)
            table = value
        return table

    def key_path(self, terminator):
        parts = []
        while True:
            self.skip_ws()
            parts.append(self.key_part())
            self.skip_ws()
            if self.peek() == ".":
                self.i += 1
                continue
            if self.s.startswith(terminator, self.i):
                return parts
            self.error("bad key")

    def key_part(self):
        c = self.peek()
        if c == '"':
            return self.basic_string()
        if c == "'":
            return self.literal_string()
        start = self.i
        while self.i < len(self.s) and (self.s[self.i].isalnum() or self.s[self.i] in "_-"):
            self.i += 1
        if start == self.i:
            self.error("empty key")
        return self.s[start:self.i]

    def key_value(self, table):
        path = self.key_path("=")
        self.i += 1
        self.skip_ws()
        value = self.value()
        target = table
        for part in path[:-1]:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                self.error("key %r is not a table" % part)
        if path[-1] in target:
            self.error("duplicate key %r" % path[-1])
        target[path[-1]] = value

    def value(self):
        c = self.peek()
        if self.s.startswith('"""', self.i):
            return self.multiline_basic()
        if self.s.startswith("'''", self.i):
            end = self.s.find("'''", self.i + 3)
            if end < 0:
                self.error("unterminated string")
            raw = self.s[self.i + 3:end]
            self.i = end + 3
            return raw[1:] if raw.startswith("\n") else raw
        if c == '"':
            return self.basic_string()
        if c == "'":
            return self.literal_string()
        if c == "[":
            return self.array()
        if c == "{":
            return self.inline_table()
        for word, result in (("true", True), ("false", False)):
            if self.s.startswith(word, self.i):
                self.i += len(word)
                return result
        match = re.compile(r"[0-9A-Za-z_:.+\-]+").match(self.s, self.i)
        if not match:
            self.error("bad value")
        self.i = match.end()
        token = match.group(0)
        cleaned = token.replace("_", "")
        try:
            if re.match(r"^[+-]?0x[0-9a-fA-F]+$", cleaned):
                return int(cleaned, 16)
            if re.match(r"^[+-]?0o[0-7]+$", cleaned):
                return int(cleaned, 8)
            if re.match(r"^[+-]?\d+$", cleaned):
                return int(cleaned)
            if re.match(r"^[+-]?(\d+(\.\d+)?([eE][+-]?\d+)?|inf|nan)$", cleaned):
                return float(cleaned)
        except ValueError:
            pass
        # Dates and times are kept as their text; runtime configs have none.
        return token

    _ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}

    def basic_string(self):
        self.i += 1
        out = []
        while True:
            c = self.peek()
            if c in ("", "\n"):
                self.error("unterminated string")
            self.i += 1
            if c == '"':
                return "".join(out)
            if c == "\\":
                out.append(self.escape())
            else:
                out.append(c)

    def escape(self):
        c = self.peek()
        self.i += 1
        if c in self._ESCAPES:
            return self._ESCAPES[c]
        if c in ("u", "U"):
            width = 4 if c == "u" else 8
            code = self.s[self.i:self.i + width]
            self.i += width
            return chr(int(code, 16))
        self.error("bad escape")

    def multiline_basic(self):
        self.i += 3
        if self.peek() == "\n":
            self.i += 1
        out = []
        while True:
            if self.s.startswith('"""', self.i):
                self.i += 3
                return "".join(out)
            c = self.peek()
            if c == "":
                self.error("unterminated string")
            self.i += 1
            if c == "\\":
                if self.peek() in ("\n", " ", "\t", "\r"):
                    while self.peek() in ("\n", " ", "\t", "\r"):
                        self.i += 1
                else:
                    out.append(self.escape())
            else:
                out.append(c)

    def literal_string(self):
        end = self.s.find("'", self.i + 1)
        if end < 0 or "\n" in self.s[self.i:end]:
            self.error("unterminated string")
        value = self.s[self.i + 1:end]
        self.i = end + 1
        return value

    def array(self):
        self.i += 1
        items = []
        while True:
            self.skip_ws_comments_newlines()
            if self.peek() == "]":
                self.i += 1
                return items
            items.append(self.value())
            self.skip_ws_comments_newlines()
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != "]":
                self.error("expected , or ] in array")

    def inline_table(self):
        self.i += 1
        table = {}
        self.skip_ws()
        if self.peek() == "}":
            self.i += 1
            return table
        while True:
            self.skip_ws()
            self.key_value(table)
            self.skip_ws()
            if self.peek() == ",":
                self.i += 1
            elif self.peek() == "}":
                self.i += 1
                return table
            else:
                self.error("expected , or } in inline table")


# --- writing ------------------------------------------------------------------

def format_key(key):
    return key if _BARE_KEY.match(key) else _quote(key)


def _quote(text):
    out = ['"']
    for c in text:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20:
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def format_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join("%s = %s" % (format_key(k), format_value(v))
                               for k, v in sorted(value.items())) + "}"
    raise TomlError("cannot write %r as TOML" % (value,))


def _is_table_array(value):
    return isinstance(value, list) and value and all(isinstance(v, dict) for v in value)


def dumps(data):
    """Serialise like go-toml: sorted keys, values first, then indented tables."""
    lines = []
    _dump_table(data, [], lines)
    text = "\n".join(lines).strip("\n")
    return text + "\n" if text else ""


def _dump_table(table, path, lines):
    indent = "  " * len(path)
    values = [k for k in sorted(table) if not isinstance(table[k], dict)
              and not _is_table_array(table[k])]
    for key in values:
        lines.append("%s%s = %s" % (indent, format_key(key), format_value(table[key])))
    for key in sorted(table):
        value = table[key]
        child = path + [key]
        header = ".".join(format_key(p) for p in child)
        child_indent = "  " * (len(child) - 1)
        if isinstance(value, dict):
            lines.append("")
            lines.append("%s[%s]" % (child_indent, header))
            _dump_table(value, child, lines)
        elif _is_table_array(value):
            for item in value:
                lines.append("")
                lines.append("%s[[%s]]" % (child_indent, header))
                _dump_table(item, child, lines)


# --- editing in place ---------------------------------------------------------

_HEADER = re.compile(r"^\s*\[\[?\s*(.+?)\s*\]\]?\s*(#.*)?$")


def _header_path(line):
    match = _HEADER.match(line)
    if not match:
        return None
    try:
        return tuple(_Parser(match.group(1) + "]").key_path("]"))
    except TomlError:
        return None


def _assignment_key(line):
    stripped = line.strip()
    if not stripped or stripped.startswith("#") or stripped.startswith("["):
        return None
    if "=" not in stripped:
        return None
    try:
        parser = _Parser(stripped)
        return tuple(parser.key_path("="))
    except TomlError:
        return None


def _value_end(lines, start):
    """Index of the last line of a (possibly multi-line) value starting at start."""
    depth = 0
    quote = None
    for index in range(start, len(lines)):
        line = lines[index]
        j = line.index("=") + 1 if index == start else 0
        while j < len(line):
            c = line[j]
            if quote:
                if c == "\\" and quote == '"':
                    j += 1
                elif c == quote:
                    quote = None
            elif c in ('"', "'"):
                quote = c
            elif c == "#":
                break
            elif c in "[{":
                depth += 1
            elif c in "]}":
                depth -= 1
            j += 1
        if depth <= 0:
            return index
    return len(lines) - 1


def set_value(text, path, value):
    """Return text with the key at path (a list) set to value, other bytes kept.

    The key is replaced where it is assigned; otherwise it is added at the end
    of its table, and a missing table is appended to the document.
    """
    table, key = tuple(path[:-1]), path[-1]
    lines = text.split("\n")
    current = ()
    section_last = {(): -1}
    index = 0
    while index < len(lines):
        line = lines[index]
        header = _header_path(line)
        if header is not None:
            current = header
            section_last.setdefault(current, index)
            index += 1
            continue
        assigned = _assignment_key(line)
        if assigned is None:
            if line.strip():
                section_last[current] = index
            index += 1
            continue
        end = _value_end(lines, index)
        if current + assigned == table + (key,):
            indent = line[:len(line) - len(line.lstrip())]
            lines[index:end + 1] = ["%s%s = %s" % (indent, ".".join(format_key(p) for p in assigned),
                                                   format_value(value))]
            return "\n".join(lines)
        section_last[current] = end
        index = end + 1
    new_line = "%s = %s" % (format_key(key), format_value(value))
    if table in section_last:
        at = section_last[table] + 1
        lines.insert(at, new_line)
        return "\n".join(lines)
    body = "\n".join(lines).rstrip("\n")
    block = "[%s]\n%s\n" % (".".join(format_key(p) for p in table), new_line)
    return (body + "\n\n" + block) if body else block


def set_top_level(text, key, value, after=None):
    """Set a top-level key, inserting it before the first table if missing.

    after: name of a top-level key the new line should follow when present.
    """
    lines = text.split("\n")
    first_table = len(lines)
    for index, line in enumerate(lines):
        if _header_path(line) is not None:
            first_table = index
            break
    anchor = None
    index = 0
    while index < first_table:
        assigned = _assignment_key(lines[index])
        if assigned is not None:
            end = _value_end(lines, index)
            if assigned == (key,):
                lines[index:end + 1] = ["%s = %s" % (format_key(key), format_value(value))]
                return "\n".join(lines)
            if after and assigned == (after,):
                anchor = end
            index = end + 1
            continue
        index += 1
    new_line = "%s = %s" % (format_key(key), format_value(value))
    if anchor is not None:
        lines.insert(anchor + 1, new_line)
    else:
        # Keep a leading comment block on top, as a human editor would.
        at = 0
        while at < first_table and lines[at].lstrip().startswith("#"):
            at += 1
        lines.insert(at, new_line)
    return "\n".join(lines)
