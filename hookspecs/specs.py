"""The hook specifications: everything a hookgrad plugin can implement.

Pass this module to ``pluggy.PluginManager("hookgrad").add_hookspecs``. A plugin implements a
hook by defining a function of the same name marked ``@hookimpl``; it may accept fewer
parameters than the spec (pluggy passes only those it names) but not other ones.

How the runtime calls the hooks
-------------------------------
* Always with keyword arguments (``event=...``, ``runtime=...``), so a spec can gain a
  parameter without breaking existing plugins.
* **In registration order, like torch hooks, not in pluggy's order.** ``pm.hook.NAME(...)``
  calls the last-registered implementation first; the runtime instead calls the
  implementations one by one in the order of :func:`hookgrad.hookspecs.call_order`: those
  marked ``tryfirst=True`` first, then the unmarked ones, then ``trylast=True`` ones, each
  group in registration order. Wrappers (``wrapper=True`` / ``hookwrapper=True``) are not
  supported on hookgrad hooks. ``hookgrad_unconfigure`` alone runs in the reverse order.
* **Replacements compose.** Where a return value replaces something (args, output,
  grad_output, grad_input, the seed gradient), the next implementation receives an event with
  that field replaced (``event.replaced(field, value)``, a ``model_copy(update=...)``), and
  the last replacement is what the
  engine uses. Returning None passes the value on unchanged.
* **Module events reach selected modules only**: the runtime calls a plugin for a module only
  when ``config.selects(module_name, module_type)`` (see ``PluginConfig``).
* **Plugins sit among the global module hooks.** The runtime dispatches from one global hook of
  each kind (``hookgrad.nn.modules.module.register_module_*``), so for every module call the
  plugins run after global hooks registered before the runtime was set up, before those
  registered after it, and always before the module's own hooks (SEMANTICS G-1): a module's
  own hooks see the plugins' replacements.
* A hook that raises is handled per the plugin's ``on_error`` setting, except a
  :class:`~hookgrad.hookspecs.PluginAbort` (a plugin stopping the caller on purpose), which
  always propagates.
* **A hook a plugin's config switches off costs nothing**: set the instance attribute to None
  in ``__init__`` (``self.hookgrad_forward = None``). pluggy registers routines only, so the
  runtime sees no implementation and installs no global hook for it: a module hook that exists
  but returns at once still costs every module call its hook machinery.

Deliberately not specs: event sinks (a plugin adds one to the runtime it receives in
``hookgrad_configure``), an end-of-run hook (``hookgrad_unconfigure`` is the end of the run,
crashed or not), and per-tensor hooks (parameter gradients are in the optimizer events).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ._markers import hookspec

if TYPE_CHECKING:
    from .events import (
        BackwardBeginEvent,
        BackwardEndEvent,
        BackwardPreEvent,
        ForwardEvent,
        ForwardPreEvent,
        FullBackwardEvent,
        OptimizerStepPostEvent,
        OptimizerStepPreEvent,
    )

__all__ = [
    "hookgrad_backward_begin",
    "hookgrad_backward_end",
    "hookgrad_backward_pre",
    "hookgrad_configure",
    "hookgrad_forward",
    "hookgrad_forward_pre",
    "hookgrad_full_backward",
    "hookgrad_optimizer_step_post",
    "hookgrad_optimizer_step_pre",
    "hookgrad_unconfigure",
]


# -------------------------------------------------------------------------------------------
# lifecycle
# -------------------------------------------------------------------------------------------
@hookspec
def hookgrad_configure(runtime: Any) -> None:
    """The plugin was activated: set up state, sinks, logging.

    Fires once per plugin when a runtime activates it (from config, environment or code),
    before any event reaches it; a plugin activated later is configured then.

    :param runtime: the ``hookgrad.Runtime`` activating the plugin: its bound logger, its
        sinks (add your own here), the merged configuration.

    The return value is ignored.
    """


@hookspec
def hookgrad_unconfigure(runtime: Any) -> None:
    """The plugin is being deactivated: flush, print end-of-run summaries, release resources.

    Fires once per configured plugin when the runtime closes (its ``with`` block exits, also on
    an exception, or ``close()`` is called) or the plugin is unregistered; plugins are
    unconfigured in the reverse of their configuration order.

    :param runtime: the same runtime ``hookgrad_configure`` received.

    The return value is ignored.
    """


# -------------------------------------------------------------------------------------------
# module forward
# -------------------------------------------------------------------------------------------
@hookspec
def hookgrad_forward_pre(event: ForwardPreEvent) -> Any | None:
    """A module is about to run ``forward`` (a forward pre-hook).

    Fires for every call of a selected module, before its own forward pre-hooks.

    :param event: the module call and its positional ``args`` and ``kwargs``.

    A non-None return replaces the positional arguments, as a forward pre-hook's does: a tuple
    becomes the new args, any other value is wrapped as ``(value,)``. Keyword arguments cannot
    be replaced (as with torch's global pre-hooks).
    """


@hookspec
def hookgrad_forward(event: ForwardEvent) -> Any | None:
    """A module's ``forward`` returned (a forward hook).

    Fires for every call of a selected module whose forward returned, before its own forward
    hooks.

    :param event: the module call, its ``args``, ``kwargs`` and ``output``.

    A non-None return replaces the output for the later hooks and the caller.
    """


# -------------------------------------------------------------------------------------------
# module backward
# -------------------------------------------------------------------------------------------
@hookspec
def hookgrad_backward_pre(event: BackwardPreEvent) -> tuple[Any, ...] | None:
    """The gradients of a module call's outputs are known; its backward has not run (a full
    backward pre-hook).

    Fires once per backward for each forward call of a selected module that is part of the
    graph, before the module's own backward pre-hooks.

    :param event: the module call and ``grad_output``, one entry per output.

    A non-None return replaces ``grad_output``: a tuple of the same length, of tensors shaped
    like the originals or None. The module's backward then uses it, so parameter gradients
    change too (SEMANTICS B-12). Gradient scaling of one layer lives here.
    """


@hookspec
def hookgrad_full_backward(event: FullBackwardEvent) -> tuple[Any, ...] | None:
    """A module call's backward produced the gradients of its inputs (a full backward hook).

    Fires once per backward for each forward call of a selected module that is part of the
    graph, after its backward and before the module's own full backward hooks.

    :param event: the module call, ``grad_input`` (one entry per positional argument) and
        ``grad_output``.

    A non-None return replaces ``grad_input`` for what flows further back: a tuple of the same
    length, of tensors shaped like the originals or None. When no input requires grad,
    ``grad_input`` is all None and only None may be returned (SEMANTICS B-9). Clamping the
    gradient flowing out of a module lives here.
    """


# -------------------------------------------------------------------------------------------
# training loop
# -------------------------------------------------------------------------------------------
@hookspec
def hookgrad_backward_begin(event: BackwardBeginEvent) -> Any | None:
    """``loss.backward(gradient)`` was called; the graph walk has not started.

    Fires on ``Tensor.backward`` and on ``hookgrad.autograd.backward`` (once per root, in
    order), not on ``hookgrad.autograd.grad``, which accumulates nothing.

    :param event: the root ``loss`` and the seed ``gradient`` (None for the implicit ones of a
        scalar loss).

    A non-None return is the new seed gradient, a tensor shaped like ``loss``: loss scaling
    returns ``scale * gradient`` (or a tensor filled with ``scale``).
    """


@hookspec
def hookgrad_backward_end(event: BackwardEndEvent) -> None:
    """The backward pass finished and every ``.grad`` it produces is accumulated.

    Fires once per ``hookgrad_backward_begin``, only if the backward did not raise.

    :param event: the root ``loss``.

    The return value is ignored.
    """


@hookspec(firstresult=True)
def hookgrad_optimizer_step_pre(event: OptimizerStepPreEvent) -> Literal[False] | None:
    """``optimizer.step()`` was called; no parameter has changed yet.

    Fires before the optimizer's torch-style step pre-hooks and before a closure passed to
    ``step`` runs. This is the gradient pipeline: unscale, guard, statistics, clipping, in
    the implementations' call order. Parameter gradients are the one thing plugins change
    in place here (``p.grad`` of ``event.parameters``), as ``clip_grad_norm_`` and
    ``GradScaler.unscale_`` do, through tensor in-place ops (``mul_``, ``clamp_``, ...) so that
    the gradient's version counter records the change (later stages rely on it: ``grad_stats``
    reuses its pre-clip summary of a gradient whose version did not move); the event's tensors
    themselves stay read-only.

    :param event: the optimizer's class name and the ``(name, parameter)`` pairs the plugin
        selected (qualified names from the model; selection as for module events, by the
        owning module's name and class).

    Return False to veto the step: the parameters, the optimizer state and the torch-style step
    hooks are left alone, later implementations are not called, and
    ``hookgrad_optimizer_step_post`` fires with ``skipped=True``. None lets the step go on.
    numpy's bools count as bools (``return bool_array.all()`` works) and True goes on as None
    does; any other return is the plugin's failure, handled by its ``on_error``.
    """


@hookspec
def hookgrad_optimizer_step_post(event: OptimizerStepPostEvent) -> None:
    """``optimizer.step()`` finished, or was vetoed.

    Fires after the optimizer's torch-style step post-hooks, or right after the veto. The
    runtime's step counter advances after this hook, so every event of one training step shares
    ``event.step``.

    :param event: as for ``hookgrad_optimizer_step_pre`` with the updated parameters,
        ``skipped`` and ``vetoed_by`` (the vetoing plugin's name; in a distributed run, where
        a veto on any rank skips the step on every rank, ``NAME@rankR`` on every rank).

    The return value is ignored.
    """
