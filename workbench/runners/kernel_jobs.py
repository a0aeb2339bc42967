"""What a worker is asked to launch for one config (a :class:`KernelJob`: binary, geometry,
arguments, outputs, a second kernel), and the host's verdict on the outputs it wrote."""

from __future__ import annotations

from workbench.compiler import CompileResult
from workbench.runners.buffers import (
    input_shapes,
    kernel_arguments,
    named_scalars,
    output_buffers,
)
from workbench.runners.input_sets import InputSet
from workbench.runners.protocol import KernelJob, OutputFiles, ThenStep, nvtx_range, read_raw
from workbench.runners.verify import Verification, tolerance_for, verify_outputs
from workbench.spaces.launch import launch_geometry, then_geometry
from workbench.spaces.model import Config, config_label
from workbench.spaces.space import Space


def kernel_job(space: Space, config: Config, compiled: CompileResult) -> KernelJob:
    """Everything a worker needs to launch ``config`` once: binary, geometry, arguments and
    outputs.

    Raises:
        ConfigError: the geometry, an argument or an output fails to evaluate for ``config``.
    """
    assert compiled.cubin is not None and compiled.entry is not None
    return KernelJob(
        label=nvtx_range(space.spec.name, config_label(config)),
        module_key=compiled.key,
        cubin=compiled.cubin,
        entry=compiled.entry,
        launch=launch_geometry(space, config),
        args=kernel_arguments(space, config),
        outputs=output_buffers(space, config),
        then=then_steps(space, config),
    )


def then_steps(space: Space, config: Config) -> tuple[ThenStep, ...]:
    """The space's second kernel (``then``) for ``config``, if it runs for it.

    Raises:
        ConfigError: its geometry or an argument fails to evaluate for ``config``.
    """
    then = space.spec.then
    launch = then_geometry(space, config)
    if then is None or launch is None:
        return ()
    return (ThenStep(then.kernel, launch, kernel_arguments(space, config, then.args)),)


def check_launch_layout(space: Space, config: Config) -> None:
    """Evaluate what a launch of ``config`` lays out on the host (geometry, arguments, outputs,
    input shapes; nothing drawn), so that a command can say what stops it before it looks for
    a GPU. An invalid config is left to the caller (a runner reports it as infeasible).

    Raises:
        ConfigError: one of them fails to evaluate for ``config``.
    """
    if space.explain(config):
        return
    launch_geometry(space, config)
    kernel_arguments(space, config)
    then_steps(space, config)
    output_buffers(space, config)
    input_shapes(space, config)


def output_verdict(
    space: Space, config: Config, job: KernelJob, inputs: InputSet, reply: OutputFiles
) -> Verification:
    """What a worker wrote for ``job`` (``reply``'s files) against the reference on ``inputs``.

    Raises:
        BadReferenceError: the reference is missing, raises, or returns the wrong outputs.
        ConfigError: the tolerance fails to evaluate.
    """
    assert inputs.expected is not None and space.spec.reference is not None
    got = {o.name: read_raw(reply.paths[o.name], o.np_dtype, o.shape) for o in job.outputs}
    expected = inputs.expected.get(config, named_scalars(job.args), job.outputs)
    tolerance = tolerance_for(space.spec.reference, space.env(config))
    return verify_outputs(got, expected, job.outputs, tolerance)
