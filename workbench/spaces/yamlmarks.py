"""YAML with line numbers: plain Python data plus a map from key path to source line.

PyYAML's composer keeps a mark on every node; we walk the node tree ourselves so that an error
found later (by the schema or by a semantic check) can still name the line it comes from.
Duplicate keys, which PyYAML would silently overwrite, are refused here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from workbench.errors import SpaceFileError

KeyPath = tuple[str | int, ...]

#: The only node types a space file needs; any other tag (!!python/..., !custom) is refused.
PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq")
)
#: Space files are small; refuse anything big enough to be a mistake (or an attack).
MAX_FILE_BYTES = 1_000_000
#: libyaml's parser where PyYAML has it: the same nodes and marks, composed 20 times faster
#: (`workbench kernels` reads every space file of the library: 0.16 s of Python parsing)
_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class MarkedDocument:
    """A parsed YAML document and the 1-based line of each node, by key path."""

    path: Path
    data: object
    lines: dict[KeyPath, int]
    #: the file's text as read and parsed (the file may be saved again meanwhile)
    text: str

    def line_of(self, key_path: Sequence[str | int]) -> int | None:
        """Line of the deepest node on ``key_path`` that exists in the file."""
        path = tuple(key_path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)

    def error(self, key_path: Sequence[str | int], message: str) -> SpaceFileError:
        """A :class:`SpaceFileError` located at ``key_path``."""
        return SpaceFileError(
            self.path, message, line=self.line_of(key_path), key=format_key(key_path) or None
        )


def format_key(key_path: Sequence[str | int]) -> str:
    """``("parameters", "BLOCK", "values", 2)`` -> ``parameters.BLOCK.values[2]``."""
    out = ""
    for part in key_path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def load_marked_yaml(path: Path) -> MarkedDocument:
    """Read a YAML file into data and a line map.

    Raises:
        SpaceFileError: unreadable file, YAML syntax error, duplicate key, anchors/aliases or
            tags (not needed by space files, and a way to build huge documents).
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpaceFileError(path, f"cannot read the file: {exc.strerror or exc}") from exc
    if len(raw) > MAX_FILE_BYTES:
        raise SpaceFileError(path, f"file is {len(raw)} bytes; a space file is at most 1 MB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpaceFileError(path, f"not UTF-8 text (byte {exc.start})") from exc
    return parse_marked_yaml(path, text)


def parse_marked_yaml(path: Path, text: str) -> MarkedDocument:
    """Parse ``text``, the file ``path`` holds (or held), into data and a line map.

    Raises:
        SpaceFileError: as :func:`load_marked_yaml`, but for reading the file.
    """
    if (size := len(text.encode("utf-8", errors="replace"))) > MAX_FILE_BYTES:
        raise SpaceFileError(path, f"file is {size} bytes; a space file is at most 1 MB")
    try:
        node = yaml.compose(text, Loader=_COMPOSER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = mark.line + 1 if mark is not None else None
        raise SpaceFileError(path, f"YAML syntax error: {problem}", line=line) from exc
    except (RecursionError, ValueError) as exc:
        raise SpaceFileError(path, f"YAML could not be read: {exc}") from exc
    if node is None:
        raise SpaceFileError(path, "the file is empty; expected a mapping of space keys")
    lines: dict[KeyPath, int] = {}
    data = _convert(path, node, (), lines, set())
    return MarkedDocument(path, data, lines, text)


def _convert(
    path: Path, node: yaml.Node, key_path: KeyPath, lines: dict[KeyPath, int], seen: set[int]
) -> object:
    if id(node) in seen:  # the composer hands an alias back as the anchored node itself
        raise _node_error(path, node, key_path, "YAML anchors and aliases are not allowed")
    seen.add(id(node))
    lines[key_path] = node.start_mark.line + 1
    if node.tag not in PLAIN_TAGS:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        raise _node_error(path, node, key_path, f"YAML tag {tag} is not allowed")
    if isinstance(node, yaml.MappingNode):
        out: dict[object, object] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise _node_error(path, key_node, key_path, "mapping keys must be plain scalars")
            key = _scalar(path, key_node, key_path)
            if isinstance(key, bool) or key is None:
                key = key_node.value  # `on:`/`yes:` as keys mean the text, not booleans
            if key in out:
                raise _node_error(path, key_node, key_path, f"duplicate key {key!r}")
            child = (*key_path, str(key))
            out[key] = _convert(path, value_node, child, lines, seen)
            lines[child] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [
            _convert(path, item, (*key_path, i), lines, seen) for i, item in enumerate(node.value)
        ]
    return _scalar(path, node, key_path)


def _scalar(path: Path, node: yaml.Node, key_path: KeyPath) -> object:
    try:  # resolve the scalar's implicit type (int, float, bool, null, str)
        return yaml.SafeLoader("").construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        raise _node_error(path, node, key_path, f"bad scalar: {exc}") from exc


def _node_error(path: Path, node: yaml.Node, key_path: KeyPath, message: str) -> SpaceFileError:
    return SpaceFileError(
        path, message, line=node.start_mark.line + 1, key=format_key(key_path) or None
    )
