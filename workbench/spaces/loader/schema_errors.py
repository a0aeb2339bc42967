"""A pydantic validation error of a space file as a :class:`SpaceFileError`: the first error,
at its file, line and key, in a plain sentence."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from workbench.errors import SpaceFileError
from workbench.spaces import schema
from workbench.spaces.yamlmarks import MarkedDocument


def schema_error(doc: MarkedDocument, exc: ValidationError) -> SpaceFileError:
    """The first pydantic error, translated to file/line/key and a plain sentence.

    For a union (``args``: a name or a mapping) pydantic reports one error per member; the
    one of the member that takes the input's kind is the one to show (a mapping's wrong
    ``dtype``, not "should be a valid string").
    """
    errors = exc.errors()
    err = errors[0]
    if isinstance(err.get("input"), dict):
        base = _without_tags(err["loc"])
        err = next(
            (
                e
                for e in errors
                if len(e["loc"]) > len(err["loc"])
                and _without_tags(e["loc"][: len(err["loc"])]) == base
                and any(isinstance(p, str) and p.endswith("Model") for p in e["loc"])
            ),
            err,
        )
    loc = _without_tags(err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = loc[:-1]
        # a union member's keys where pydantic names the member (args: a tensor map's)
        member = next(
            (
                getattr(schema, p)
                for p in reversed(err["loc"][:-1])
                if isinstance(p, str) and p.endswith("Model") and hasattr(schema, p)
            ),
            None,
        )
        allowed = sorted(member.model_fields) if member else _allowed_keys(doc, parent)
        hint = f"; expected one of: {', '.join(allowed)}" if allowed else ""
        return doc.error(loc, f"unknown key {loc[-1]!r}{hint}")
    if kind == "missing":
        return doc.error(loc[:-1], f"missing required key {loc[-1]!r}")
    got = err.get("input")
    shown = repr(got) if not isinstance(got, dict | list) else type(got).__name__
    return doc.error(loc, f"{err['msg']} (got {shown[:80]})")


def _without_tags(loc: Sequence[object]) -> list[str | int]:
    return [p for p in loc if not _is_union_tag(p)]  # type: ignore[misc]


def _is_union_tag(part: object) -> bool:
    # pydantic puts the union member it tried into loc ("str", "ConstraintModel", "list[...]")
    return isinstance(part, str) and (
        part in {"str", "int", "float", "bool"}
        or part.endswith("Model")
        or "[" in part
        or part.startswith(("function-", "constrained-"))
    )


def _allowed_keys(doc: MarkedDocument, parent: Sequence[str | int]) -> list[str]:
    """Keys a mapping at ``parent`` may hold, found by walking the schema."""
    model: type = schema.SpaceModel
    in_user_dict = False  # the next part is a user's key (parameters.BLOCK), not a field
    for part in parent:
        if isinstance(part, int):
            continue
        if in_user_dict:
            in_user_dict = False
            continue
        field = model.model_fields.get(part)  # type: ignore[attr-defined]
        sub = None if field is None else _model_in(field.annotation)
        if sub is None:
            return []
        in_user_dict = "dict[" in str(field.annotation)
        model = sub
    return sorted(model.model_fields)  # type: ignore[attr-defined]


def _model_in(annotation: object) -> type | None:
    """The pydantic model inside an annotation such as ``dict[str, ParameterModel] | None``."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None
