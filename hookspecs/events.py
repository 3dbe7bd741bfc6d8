"""Event payloads: one frozen pydantic model per hook, passed to plugins as ``event``.

Tensors read from a payload (``event.args``, ``event.grad_output``, ...) are read-only aliases
of the engine's tensors, made at each read: the same memory (never copied) and the same place
in the autograd graph, so reading and computing from them is as from the originals, but writing
into one raises numpy's ``ValueError`` (``... read-only``) instead of silently changing the
caller's input or backward's gradient. The parameters of the optimizer events are the
parameters themselves. A plugin
changes a value by returning a replacement from the hook (see :mod:`hookgrad.hookspecs.specs`);
at the optimizer step it changes ``p.grad`` of ``event.parameters`` in place, the one
documented exception. Models are strict (no coercion: a tuple field takes a tuple),
frozen and reject unknown fields. Building one costs a couple of microseconds, so the runtime
builds none when no plugin listens.

``event.summary()`` is what sinks write: the scalar fields as they are and every tensor as a
:class:`~hookgrad.hookspecs.TensorSummary` (``model_dump(mode="json")`` gives the same dict), and
``model_json_schema()`` describes that JSON form.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Final, Literal, Self, TypeAlias

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from hookgrad._tensor import Tensor
from hookgrad.engines import engine_of

from ._stats import TENSOR_SUMMARY_SCHEMA, array_stats, tensor_stats, to_json

__all__ = [
    "BackwardBeginEvent",
    "BackwardEndEvent",
    "BackwardPreEvent",
    "Event",
    "ForwardEvent",
    "ForwardPreEvent",
    "FullBackwardEvent",
    "HOOK_EVENTS",
    "ModuleEvent",
    "ModulePhase",
    "OptimizerStepPostEvent",
    "OptimizerStepPreEvent",
    "PluginRecord",
    "RunEvent",
    "RunPhase",
]

ModulePhase: TypeAlias = Literal["forward_pre", "forward", "backward_pre", "backward"]
RunPhase: TypeAlias = Literal[
    "backward_begin", "backward_end", "optimizer_step_pre", "optimizer_step_post"
]


# ---------------------------------------------------------------------- field types
def _summarise_parameters(parameters: tuple[tuple[str, Tensor], ...]) -> dict[str, Any]:
    if not parameters or isinstance(parameters[0][1], Tensor):
        return {
            name: {
                "param": array_stats(p._data),
                "grad": None if p._grad is None else array_stats(p._grad._data),
            }
            for name, p in parameters
        }
    # Another engine's parameters: all summaries in one batch (one host sync on a GPU).
    engine = engine_of(parameters[0][1])
    if engine is None:
        raise TypeError(f"not a tensor: {type(parameters[0][1]).__name__}")
    grads = [p.grad for _, p in parameters if p.grad is not None]
    stats = iter(engine.summaries([p for _, p in parameters] + grads))
    params = {name: next(stats) for name, _ in parameters}
    return {
        name: {"param": params[name], "grad": None if p.grad is None else next(stats)}
        for name, p in parameters
    }


def _engine_tensor(value: Any) -> Any:
    """Accept a tensor of any engine the runtime drives (hookgrad's, torch's), as it is."""
    if isinstance(value, Tensor) or engine_of(value) is not None:
        return value
    raise PydanticCustomError(
        "is_instance_of",
        "Input should be an instance of Tensor",
        {"class": "Tensor"},
    )


ENGINE_TENSOR: Final = PlainValidator(_engine_tensor)
"""The validator of a payload's tensor fields: a ``hookgrad.Tensor`` or another engine's
tensor (``torch.Tensor`` when the runtime drives torch), typed ``Any`` for plugin code that
runs on either engine. docs/_generate_events.py shows such a field as ``Tensor``."""

_TensorField: TypeAlias = Annotated[
    Any,
    ENGINE_TENSOR,
    WithJsonSchema(TENSOR_SUMMARY_SCHEMA),
    PlainSerializer(tensor_stats, return_type=Any, when_used="json"),
]
_Grads: TypeAlias = tuple[_TensorField | None, ...]
_ANY_JSON = (
    "JSON form: tensors as TensorSummary objects, tuples and lists as arrays, other objects as "
    "their repr"
)
_Args: TypeAlias = Annotated[
    tuple[Any, ...],
    WithJsonSchema({"type": "array", "description": _ANY_JSON}),
    PlainSerializer(to_json, return_type=Any, when_used="json"),
]
_Kwargs: TypeAlias = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "description": _ANY_JSON}),
    PlainSerializer(to_json, return_type=Any, when_used="json"),
]
_Output: TypeAlias = Annotated[
    Any,
    WithJsonSchema({"description": _ANY_JSON}),
    PlainSerializer(to_json, return_type=Any, when_used="json"),
]
_NamedParameters: TypeAlias = Annotated[
    tuple[tuple[str, Annotated[Any, ENGINE_TENSOR]], ...],
    WithJsonSchema(
        {
            "type": "object",
            "description": "Qualified parameter name -> the parameter and its .grad",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "param": TENSOR_SUMMARY_SCHEMA,
                    "grad": {"anyOf": [TENSOR_SUMMARY_SCHEMA, {"type": "null"}]},
                },
                "required": ["param", "grad"],
            },
        }
    ),
    PlainSerializer(_summarise_parameters, return_type=Any, when_used="json"),
]
_NonNegativeInt: TypeAlias = Annotated[int, Field(ge=0)]
_new = object.__new__
# The setters of the instance fields every model has (BaseModel's slots and its __dict__),
# taken from their descriptors: a third cheaper than object.__setattr__ by name.
_set_dict: Final = BaseModel.__dict__["__dict__"].__set__
_set_fields_set: Final = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra: Final = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private: Final = BaseModel.__dict__["__pydantic_private__"].__set__


_JSON_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _check_json(value: Any, path: str) -> None:
    """Raise ValueError naming ``path`` if ``value`` is not made of JSON types only."""
    if value is None or isinstance(value, str | bool | int | float):
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{path}: keys must be strings, got {key!r}")
            _check_json(item, f"{path}.{key}")
        return
    raise ValueError(
        f"{path} is a {type(value).__name__}, not JSON: use None, bool, int, float, str, "
        "lists and dicts of them (float(x) for a numpy scalar, .tolist() for an array)"
    )


def _json_details(value: dict[str, Any]) -> dict[str, Any]:
    """``PluginRecord.data``'s check: a plain walk, ~10x cheaper than pydantic's JsonValue
    union (which picks a branch per value), on a path every record of every step takes."""
    for key, item in value.items():
        if type(item) not in _JSON_SCALARS:  # exact types first: most details are numbers
            _check_json(item, f"data.{key}")
    return value


def _is_json_details(value: dict[str, Any]) -> bool:
    try:
        _json_details(value)
    except ValueError:
        return False
    return True


_JsonDetails: TypeAlias = Annotated[
    dict[str, Any],
    AfterValidator(_json_details),
    WithJsonSchema(
        {"type": "object", "description": "JSON-safe details, e.g. pre_norm, post_norm"}
    ),
]


def _read_only(value: Any) -> Any:
    """``value`` with every tensor in it, and in the tuples, lists and dicts in it, a read-only
    alias; containers are rebuilt, anything else is returned as it is."""
    if isinstance(value, Tensor):
        return value._read_only_alias()
    kind = type(value)
    if kind is tuple:
        return tuple([_read_only(v) for v in value])
    if kind is list:
        return [_read_only(v) for v in value]
    if kind is dict and value:
        return {k: _read_only(v) for k, v in value.items()}
    return value


def _read_only_field(name: str) -> property:
    """The attribute ``name`` of an event: its stored value with every tensor aliased
    read-only, built at each read, so that an event nobody reads costs nothing more."""

    def read(event: Event) -> Any:
        return _read_only(event.__dict__[name])

    read.__name__ = name
    return property(read, doc=f"``{name}``, its tensors read-only (see the module docstring)")


# ---------------------------------------------------------------------- bases
class Event(BaseModel):
    """Base of every payload: frozen, strict, no unknown fields, tensors shared."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", strict=True, arbitrary_types_allowed=True
    )

    hook: ClassVar[str] = ""
    """The name of the hook this payload is passed to (empty on the bases)."""

    # Every field name of the class: the fields-set of each trusted instance (see trusted).
    _all_fields: ClassVar[set[str]] = set()

    read_only_fields: ClassVar[tuple[str, ...]] = ()
    """The fields read as read-only aliases (see the module docstring); the value stored,
    which the runtime reads and ``model_dump`` returns, is ``event.__dict__[name]``."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._all_fields = set(cls.model_fields)
        for name in cls.read_only_fields:
            setattr(cls, name, _read_only_field(name))

    @classmethod
    def trusted(cls, fields: dict[str, Any]) -> Self:
        """Build an event without validating ``fields``: the runtime's hot path.

        The runtime builds an event per hook call from values right by construction (its own
        names and counters, the engine's tensors, every field given); skipping validation
        cuts the cost by two thirds. ``fields`` becomes the instance's ``__dict__`` as it is
        (a dict literal at the call site costs less than keyword arguments). The instance is
        otherwise a normal one: frozen, ``model_copy``, ``summary`` and equality work. Plugins
        and tests use the validating constructor. As every field is given, all instances
        share the class's one set of field names as their ``model_fields_set`` (pydantic
        copies it before changing it).
        """
        event = _new(cls)
        _set_dict(event, fields)
        _set_fields_set(event, cls._all_fields)
        _set_extra(event, None)
        _set_private(event, None)
        return event

    def replaced(self, field: str, value: Any) -> Self:
        """This event with ``field`` set to ``value``: what ``model_copy(update=...)`` makes,
        built as :meth:`trusted` builds (no validation; the runtime has checked ``value``), at
        a third of model_copy's cost. How the runtime hands a listener's replacement on."""
        return self.trusted({**self.__dict__, field: value})

    def summary(self) -> dict[str, Any]:
        """The JSON-safe form sinks write: scalar fields as-is, tensors as TensorSummary dicts."""
        return self.model_dump(mode="json")


class ModuleEvent(Event):
    """Base of the four module-hook payloads: which module call the event belongs to."""

    module_name: str = Field(
        description='Dotted qualified name from the outermost module called; "" for the root'
    )
    module_type: str = Field(description="The module's class name, e.g. Linear")
    call_index: _NonNegativeInt = Field(
        description=(
            "Which call of this module in the current forward, from 0; backward events carry "
            "the index of the forward call they differentiate"
        )
    )
    step: _NonNegativeInt = Field(description="The runtime's training step counter")
    phase: ModulePhase


class RunEvent(Event):
    """Base of the training-loop payloads (backward and optimizer step), not tied to a module."""

    step: _NonNegativeInt = Field(description="The runtime's training step counter")
    phase: RunPhase


# ---------------------------------------------------------------------- module events
class ForwardPreEvent(ModuleEvent):
    """Before ``forward``: the arguments the module is about to receive."""

    hook: ClassVar[str] = "hookgrad_forward_pre"
    read_only_fields: ClassVar[tuple[str, ...]] = ("args", "kwargs")
    phase: Literal["forward_pre"] = "forward_pre"
    args: _Args = Field(description="Positional arguments, after earlier pre-hooks' replacements")
    kwargs: _Kwargs = Field(
        description="Keyword arguments of the call (read-only: cannot be replaced); always {} "
        "on torch models, whose global forward pre-hook receives none"
    )


class ForwardEvent(ModuleEvent):
    """After ``forward``: its arguments and output."""

    hook: ClassVar[str] = "hookgrad_forward"
    read_only_fields: ClassVar[tuple[str, ...]] = ("args", "kwargs", "output")
    phase: Literal["forward"] = "forward"
    args: _Args = Field(description="Positional arguments forward received")
    kwargs: _Kwargs = Field(description="Keyword arguments forward received")
    output: _Output = Field(description="forward's output, after earlier hooks' replacements")


class BackwardPreEvent(ModuleEvent):
    """Before the module's backward: the gradients with respect to its outputs."""

    hook: ClassVar[str] = "hookgrad_backward_pre"
    read_only_fields: ClassVar[tuple[str, ...]] = ("grad_output",)
    phase: Literal["backward_pre"] = "backward_pre"
    grad_output: _Grads = Field(
        description="One entry per output; None for non-tensor outputs and unused outputs"
    )


class FullBackwardEvent(ModuleEvent):
    """After the module's backward: gradients with respect to its inputs and outputs."""

    hook: ClassVar[str] = "hookgrad_full_backward"
    read_only_fields: ClassVar[tuple[str, ...]] = ("grad_input", "grad_output")
    phase: Literal["backward"] = "backward"
    grad_input: _Grads = Field(
        description="One entry per positional argument; None for non-tensor arguments"
    )
    grad_output: _Grads = Field(description="As in BackwardPreEvent, after its replacements")


# ---------------------------------------------------------------------- training-loop events
class BackwardBeginEvent(RunEvent):
    """``loss.backward(gradient)`` was called; the graph walk has not started."""

    hook: ClassVar[str] = "hookgrad_backward_begin"
    read_only_fields: ClassVar[tuple[str, ...]] = ("loss", "gradient")
    phase: Literal["backward_begin"] = "backward_begin"
    loss: _TensorField = Field(description="The root tensor backward was called on")
    gradient: _TensorField | None = Field(
        description="The seed gradient; None means ones (a scalar loss)"
    )


class BackwardEndEvent(RunEvent):
    """The backward pass finished: every ``.grad`` it produces is accumulated."""

    hook: ClassVar[str] = "hookgrad_backward_end"
    read_only_fields: ClassVar[tuple[str, ...]] = ("loss",)
    phase: Literal["backward_end"] = "backward_end"
    loss: _TensorField = Field(description="The root tensor backward was called on")


class OptimizerStepPreEvent(RunEvent):
    """``optimizer.step()`` was called; no parameter has changed yet."""

    hook: ClassVar[str] = "hookgrad_optimizer_step_pre"
    phase: Literal["optimizer_step_pre"] = "optimizer_step_pre"
    optimizer_type: str = Field(description="The optimizer's class name, e.g. SGD")
    optimizer: Any = Field(
        default=None,
        exclude=True,
        description=(
            "The optimizer itself (its param_groups, state_dict); not written to logs, None "
            "in an event built by hand"
        ),
    )
    parameters: _NamedParameters = Field(
        description=(
            "(qualified name, parameter) pairs this plugin selected, in the optimizer's order; "
            "gradients are p.grad (None when a parameter got none)"
        )
    )


class OptimizerStepPostEvent(RunEvent):
    """``optimizer.step()`` returned, or was skipped because a plugin vetoed it."""

    hook: ClassVar[str] = "hookgrad_optimizer_step_post"
    phase: Literal["optimizer_step_post"] = "optimizer_step_post"
    optimizer_type: str = Field(description="The optimizer's class name, e.g. SGD")
    optimizer: Any = Field(default=None, exclude=True, description="As in OptimizerStepPreEvent")
    parameters: _NamedParameters = Field(description="As in OptimizerStepPreEvent, after the step")
    skipped: bool = Field(description="True when a plugin vetoed the step")
    vetoed_by: str | None = Field(
        description=(
            "The name of the plugin that vetoed, else None; in a distributed run NAME@rankR, "
            "the same on every rank (R: the lowest rank whose plugin NAME vetoed)"
        )
    )


# ---------------------------------------------------------------------- plugin records
class PluginRecord(Event):
    """What a plugin reports to the runtime's sinks: a clip, a scale backoff, a skipped step.

    Not a hook payload: plugins build records and hand them to the runtime, which writes
    them beside the event summaries, so one log shows both on the same step axis.
    """

    plugin: str = Field(description="The plugin's name, e.g. grad_clip")
    kind: str = Field(description="What happened, e.g. clip, backoff, skip_step")
    step: _NonNegativeInt = Field(description="The runtime's training step counter")
    module_name: str | None = Field(
        default=None, description="The module it concerns, if any (qualified name)"
    )
    data: _JsonDetails = Field(
        default_factory=dict, description="JSON-safe details, e.g. pre_norm, post_norm"
    )
    rank: _NonNegativeInt = Field(
        default=0,
        description=(
            "The rank of the process that wrote it in a distributed run, 0 outside one; "
            "the runtime sets it"
        ),
    )

    def summary(self) -> dict[str, Any]:
        """The record as sinks write it; ``data`` is JSON already, so it is shared, not copied."""
        return dict(self.__dict__)

    @classmethod
    def json_of(cls, record: Mapping[str, Any], *, step: int, rank: int = 0) -> dict[str, Any]:
        """The JSON form of a record given as a mapping, ``step`` filling a missing step and
        ``rank`` the rank (whatever the mapping says: the writer knows its rank).

        The same checks as validating a PluginRecord, done with plain type tests on the path
        every record of every step takes (a plugin emits dozens per step); anything the fast
        test does not accept goes through pydantic, so a bad record raises its
        ValidationError.
        """
        data = record.get("data", _NO_DATA)
        step = record.get("step", step)
        module_name = record.get("module_name")
        if (
            record.keys() <= _RECORD_FIELDS
            and type(record.get("plugin")) is str
            and type(record.get("kind")) is str
            and type(step) is int
            and step >= 0
            and (module_name is None or type(module_name) is str)
            and type(data) is dict
            and _is_json_details(data)
        ):
            return {
                "plugin": record["plugin"],
                "kind": record["kind"],
                "step": step,
                "module_name": module_name,
                "data": data if data is not _NO_DATA else {},
                "rank": rank,
            }
        return cls.model_validate({"step": step, **record, "rank": rank}).summary()


_RECORD_FIELDS: Final = frozenset(PluginRecord.model_fields)
_NO_DATA: Final[dict[str, Any]] = {}

HOOK_EVENTS: Final[Mapping[str, type[Event]]] = MappingProxyType(
    {
        cls.hook: cls
        for cls in (
            ForwardPreEvent,
            ForwardEvent,
            BackwardPreEvent,
            FullBackwardEvent,
            BackwardBeginEvent,
            BackwardEndEvent,
            OptimizerStepPreEvent,
            OptimizerStepPostEvent,
        )
    }
)
"""Hook name -> the payload model passed to it as ``event``."""
