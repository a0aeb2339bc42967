"""Read a tuning-space file into a :class:`~workbench.spaces.model.SpaceSpec`, or say exactly
what is wrong with it.

Three passes: YAML with line marks (:mod:`~workbench.spaces.yamlmarks`), shape and types
(:mod:`~workbench.spaces.schema`, pydantic; its errors located by
:mod:`~workbench.spaces.loader.schema_errors`), then meaning (this package): every name an
expression uses exists, the source file exists inside the project, defaults lie in their
domains, roles fit the language. Every error is a :class:`~workbench.errors.SpaceFileError`
naming the file, line and key.

- :mod:`~workbench.spaces.loader.build`: :func:`load_space`, the parts in order, the spec;
- :mod:`~workbench.spaces.loader.checks`: what every part is checked with (located errors,
  expressions over known names, files inside the project);
- one module per part of the file: :mod:`~workbench.spaces.loader.parameters`,
  :mod:`~workbench.spaces.loader.buffers`, :mod:`~workbench.spaces.loader.arguments`,
  :mod:`~workbench.spaces.loader.python_targets`.
"""

from __future__ import annotations

from workbench.spaces.loader.build import load_kept_space, load_space
from workbench.spaces.loader.checks import project_root

__all__ = ["load_kept_space", "load_space", "project_root"]
