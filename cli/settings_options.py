"""Command options derived from a runner's settings dataclass.

A runner's settings (``ExploreSettings``, ``DSRSettings``, ...) say what a run is, and the
command that starts the run offers one option per field. :func:`settings_command` builds those
options from :func:`dataclasses.fields` (name, type, default) and the command's table of
:class:`FieldOption` lines (the flag and its help), so a new field is one edit to the dataclass
plus its line in the table. The command receives the fields given as keyword arguments for
the dataclass, and builds it where its own checks allow.

A settings module imports its runner (LangGraph, torch, ...), so a command's options are built
the first time the command runs or shows its own ``--help``; listing it in its group's help
costs nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

import typer
from typer.core import TyperCommand

from embodia.cli.root import finite, valid_seed

_FIELD_DEFAULT: Any = object()
"""A :class:`FieldOption` without a default of its own: the field's applies."""


@dataclasses.dataclass(frozen=True)
class FieldOption:
    """How one field of a settings dataclass shows on the command line."""

    help: str | None = None
    flag: str | None = None
    """The option's name, e.g. ``--height`` or ``--video/--no-video``; default ``--FIELD-NAME``."""
    default: Any = _FIELD_DEFAULT
    """The command's default where it differs from the field's, or the field has none."""


OWN = None
"""In a command's table: one of the command's own parameters (not a field), placed there in ``--help``."""

OptionTable = Mapping[str, FieldOption | None]


@dataclasses.dataclass(frozen=True)
class _Derived:
    """One field's option: its parameter in the command's signature, and whether the field is a
    tuple (a repeatable option, given as a list; not given, the field keeps its default)."""

    parameter: inspect.Parameter
    is_tuple: bool


def _option_type(hint: Any) -> tuple[Any, bool]:
    """The option's type for a field's type, and whether the field is a tuple. A ``Literal`` is
    a plain string: the command or the dataclass checks it and names the choices in its error."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return str, False
    if origin in (types.UnionType, typing.Union) and type(None) in args:
        (inner,) = (a for a in args if a is not type(None))
        option_type, is_tuple = _option_type(inner)
        return (option_type if is_tuple else option_type | None), is_tuple
    if origin is tuple:
        return types.GenericAlias(list, args[0]) | None, True
    return hint, False


def _derive(field: dataclasses.Field[Any], hint: Any, line: FieldOption) -> _Derived:
    option_type, is_tuple = _option_type(hint)
    if is_tuple:
        default: Any = None
    elif line.default is not _FIELD_DEFAULT:
        default = line.default
    elif field.default is not dataclasses.MISSING:
        default = field.default
    else:
        default = inspect.Parameter.empty  # a field without a default: a required option
    callback: Callable[..., Any] | None = None
    if field.name == "seed":
        callback = valid_seed
    elif option_type in (float, float | None):
        callback = finite
    flag = line.flag or "--" + field.name.replace("_", "-")
    info = typer.Option(flag, help=line.help, callback=callback)
    annotation = Annotated[option_type, info]  # type: ignore[valid-type]  # a type made at run time
    parameter = inspect.Parameter(
        field.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )
    return _Derived(parameter, is_tuple)


def _signature(
    settings: type[Any], table: OptionTable, hidden: tuple[str, ...], command: Callable[..., None]
) -> tuple[inspect.Signature, dict[str, _Derived]]:
    """The whole command's signature, in the table's order (own parameters it does not name come
    last), and the derived options by field name. A field neither in the table nor hidden, or a
    table line that names no field, is a mistake in the command and fails here, at its --help."""
    fields = {f.name: f for f in dataclasses.fields(settings)}
    hints = typing.get_type_hints(settings)
    own = dict(list(inspect.signature(command, eval_str=True).parameters.items())[1:])
    unplaced = set(fields) - set(table) - set(hidden)
    unknown = {n for n, line in table.items() if (n not in fields if line is not OWN else n not in own)}
    if unplaced or unknown or set(hidden) - set(fields):
        raise TypeError(
            f"{command.__name__}: fields of {settings.__name__} without a table line or hidden: "
            f"{sorted(unplaced)}; names in its table or hidden that are neither its fields nor the "
            f"command's parameters: {sorted(unknown | (set(hidden) - set(fields)))}"
        )
    derived = {n: _derive(fields[n], hints[n], line) for n, line in table.items() if line is not OWN}
    ordered = [derived[n].parameter if n in derived else own[n] for n in table]
    ordered += [p for n, p in own.items() if n not in table]
    keyword_only = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in ordered]
    return inspect.Signature(keyword_only), derived


def _build(
    name: str,
    load: Callable[[], type[Any]],
    table: OptionTable,
    hidden: tuple[str, ...],
    command: Callable[..., None],
) -> Any:
    """The real click command: the settings' options and the command's own, in one signature."""
    signature, derived = _signature(load(), table, hidden, command)

    def run(**given: Any) -> None:
        options: dict[str, Any] = {}
        for field, option in derived.items():
            value = given.pop(field)
            if not option.is_tuple:
                options[field] = value
            elif value:
                options[field] = tuple(value)
        command(options, **given)

    run.__signature__ = signature  # type: ignore[attr-defined]  # what typer reads the options from
    single = typer.Typer(add_completion=False)
    single.command(name, help=inspect.getdoc(command))(run)
    return typer.main.get_command(single)


class _DeferredCommand(TyperCommand):
    """Stands in its group for a command whose options come from a settings dataclass: the
    group's help lists it from its help text alone; running it, or its own ``--help``, builds the
    real command (importing the settings' module) and hands it the arguments."""

    real: Callable[[], Any]

    @property
    def params(self) -> list[Any]:
        """The real command's options, for whoever looks the command line over (a test, completion)."""
        return list(type(self).real().params)

    @params.setter
    def params(self, value: list[Any]) -> None:
        """Click's constructor sets the stand-in's own options: it has none to keep."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        return type(self).real().make_context(info_name, args, parent, **extra)


def _never_called() -> None:
    """The stand-in's callback: its context is the real command's, so the real callback runs."""
    raise AssertionError("a deferred command runs through the command it builds")


def settings_command(
    group: typer.Typer,
    name: str,
    load: Callable[[], type[Any]],
    table: OptionTable,
    *,
    hidden: tuple[str, ...] = (),
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Add the decorated function to ``group`` as command ``name``, with one option per field of
    the settings dataclass ``load()`` returns that ``table`` names (fields in ``hidden`` are not
    options). The function's first parameter receives the given fields, as keyword arguments for
    the dataclass; its other parameters are its own options, placed in --help where the table
    names them with :data:`OWN`."""

    def register(command: Callable[..., None]) -> Callable[..., None]:
        build = functools.cache(lambda: _build(name, load, table, hidden, command))
        stand_in = type(f"{command.__name__}_command", (_DeferredCommand,), {"real": staticmethod(build)})
        group.command(name, help=inspect.getdoc(command), cls=stand_in)(_never_called)
        return command

    return register
