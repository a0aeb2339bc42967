"""A space's inputs at one problem shape: drawn once, written once as the files a worker loads,
with the reference's outputs on them cached."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.errors import ConfigError
from workbench.runners.buffers import (
    draw_named_input,
    input_config_names,
    input_config_values,
    input_shapes,
    input_specs,
    numpy_dtype,
)
from workbench.runners.protocol import InputFile, write_raw
from workbench.runners.reference import ExpectedOutputs
from workbench.spaces.model import InputSpec, Value, shape_label
from workbench.spaces.schema import DType
from workbench.spaces.space import Space


@dataclass(frozen=True)
class InputSet:
    """The inputs of one problem: the arrays, the files a worker loads them from, and the
    cache of the reference's outputs on them (None when nothing is verified)."""

    key: str  #: the problem shape, the config values input shapes use, and the seed
    arrays: Mapping[str, np.ndarray]
    files: tuple[InputFile, ...]
    expected: ExpectedOutputs | None


class InputSets:
    """A space's inputs at one shape: drawn once per shape and per the values of the
    parameters and derived values their shapes use (``n_scales``: one set per scale count),
    each array written once to ``directory`` as the ``.npy`` file a worker loads.

    Args:
        space: the space at the problem shape (on the device that runs it).
        seed: seed of the random inputs.
        directory: where the input files go.
        reference: the reference's target, to cache its outputs per set (None: no reference).
        given: arrays used instead of drawing the inputs of those names.
    """

    def __init__(
        self,
        space: Space,
        seed: int,
        directory: Path,
        reference: str | None,
        given: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        self.space = space
        self.given = dict(given or {})
        self.seed = seed
        self.directory = directory
        self.reference = reference
        self._sets: dict[str, InputSet] = {}
        #: (input name, dtype, shape, low, high) -> the array and its file: drawn and written once
        self._arrays: dict[
            tuple[str, DType, tuple[int, ...], float, float], tuple[np.ndarray, InputFile]
        ] = {}

    def key(self, config: Mapping[str, Value]) -> str:
        """The key of ``config``'s inputs: the problem shape, the values of the config names
        the input shapes use, and the seed (``M=4096,K=4096;n_scales=4096;seed=0``).

        Raises:
            ConfigError: a derived value fails to evaluate.
        """
        values = input_config_values(self.space, config)
        used = "".join(f";{name}={value}" for name, value in values)
        return f"{shape_label(self.space.shape)}{used};seed={self.seed}"

    def shapes(self, config: Mapping[str, Value]) -> dict[str, tuple[int, ...]]:
        """The shape of each input of ``config`` (nothing drawn).

        Raises:
            ConfigError: an input's shape fails to evaluate.
        """
        return input_shapes(self.space, config)

    def prepare(self) -> None:
        """Draw the inputs now when the problem shape alone decides them, so that an input
        that cannot be drawn stops the run before any config (otherwise: at each config)."""
        if not input_config_names(self.space):
            self.get({})

    def get(self, config: Mapping[str, Value]) -> InputSet:
        """The inputs ``config`` runs on.

        Raises:
            ConfigError: an input's shape fails to evaluate, or its draw gives only zeros.
        """
        key = self.key(config)
        found = self._sets.get(key)
        if found is not None:
            return found
        shapes = self.shapes(config)
        arrays, files = {}, []
        for spec in input_specs(self.space, config).values():
            array, file = self._array(spec, shapes[spec.name])
            arrays[spec.name] = array
            files.append(file)
        expected = (
            ExpectedOutputs(self.reference, arrays, self.space.shape) if self.reference else None
        )
        made = self._sets[key] = InputSet(key, arrays, tuple(files), expected)
        return made

    def _array(self, spec: InputSpec, shape: tuple[int, ...]) -> tuple[np.ndarray, InputFile]:
        """Input ``spec`` (its dtype fixed) at ``shape``: drawn and written once."""
        dtype = DType(spec.dtype)
        # (bounds that were expressions differ between problems of one shape: they are part of
        # the array's identity, and of its file's name)
        key = (spec.name, dtype, shape, spec.low, spec.high)
        known = self._arrays.get(key)
        if known is None:
            array = self._given(spec, dtype, shape)
            if array is None:
                array = draw_named_input(spec, shape, self.seed)
            dims = "x".join(map(str, shape))
            same = sum(k[:3] == key[:3] for k in self._arrays)
            path = (
                self.directory
                / f"input-{spec.name}-{dtype.value}-{dims}{f'-{same}' if same else ''}.npy"
            )
            file = InputFile(spec.name, str(path), write_raw(path, array))
            known = self._arrays[key] = (array, file)
        return known

    def _given(self, spec: InputSpec, dtype: DType, shape: tuple[int, ...]) -> np.ndarray | None:
        """The given array of input ``spec`` (None: draw it).

        Raises:
            ConfigError: it has another dtype or shape than the input.
        """
        array = self.given.get(spec.name)
        if array is None:
            return None
        want = numpy_dtype(dtype)
        if array.dtype != want or tuple(array.shape) != shape:
            raise ConfigError(
                f"given input {spec.name} is {array.dtype} {tuple(array.shape)}; "
                f"{self.space.spec.name} takes {want} {shape}"
            )
        return np.ascontiguousarray(array)
