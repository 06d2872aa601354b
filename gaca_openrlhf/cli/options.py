"""Command-line options generated from the project's config dataclasses, and deprecated names that keep working.

- :func:`add_dataclass_options`: one ``--<namespace>.<field>`` option per field of a dataclass, its help text and
  choices read from the field's metadata (``help``, ``choices``), so that the option, the parsed attribute
  (``args.<namespace>.<field>``) and the config field share one name;
- :func:`add_deprecated_flag`: an old option name that sets the new option's value, with a ``FutureWarning`` (shown
  to users by default) naming the new one;
- :func:`with_new_names`: a command line with its deprecated option names replaced by the new ones (to compare two
  commands);
- :class:`AliasedNamespace`: a parsed-args namespace whose old attribute names still read and write their new homes,
  with a ``DeprecationWarning`` (for code not moved yet).
"""
from __future__ import annotations

import argparse
import dataclasses
import typing
import warnings
from types import SimpleNamespace
from typing import Any


def _unwrap_optional(hint):
    if typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _default(f: dataclasses.Field) -> Any:
    if "cli_default" in f.metadata:  # the option's own default differs (e.g. None: derived from other options)
        return f.metadata["cli_default"]
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def parse_bool(text: str) -> bool:
    """A boolean option's value: true/false, 1/0, yes/no (any case); anything else is an argparse error."""
    value = str(text).strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def option_spec(f: dataclasses.Field, hint, with_defaults: bool = True) -> dict:
    """``add_argument`` keywords for field ``f`` of type ``hint``.

    ``int``/``float`` parse as such, a ``bool`` as ``true|false`` (also ``1|0``, ``yes|no``; :func:`parse_bool`:
    a bare string would make "false" true for code reading the option directly); a ``list[T]`` takes one or more
    values; everything else (``str``, ``Literal``, ``dict``) stays text for the config to read (a ``dict`` as JSON),
    as the configs' own validation expects. Without ``with_defaults`` every option defaults to None (the config's
    default applies).
    """
    hint = _unwrap_optional(hint)
    spec: dict = {"help": f.metadata.get("help", "")}
    origin = typing.get_origin(hint) or hint
    if origin is list:
        spec["nargs"] = "+"
        (hint,) = typing.get_args(hint) or (str,)
        origin = hint
    if origin in (int, float):
        spec["type"] = origin
    if origin is bool:
        spec["type"] = parse_bool
    if "choices" in f.metadata:
        spec["choices"] = list(f.metadata["choices"])
    spec["default"] = _default(f) if with_defaults else None
    return spec


def add_dataclass_options(parser: argparse.ArgumentParser, cls, namespace: str, title: str, *, skip=(),
                          with_defaults: bool = True) -> list[str]:
    """Add ``--<namespace>.<field>`` for every field of dataclass ``cls`` (except ``skip`` and fields whose metadata
    names the option that sets them, ``from``); returns the field names given an option."""
    group = parser.add_argument_group(title)
    hints = typing.get_type_hints(cls)
    added = []
    for f in dataclasses.fields(cls):
        if f.name in skip or "from" in f.metadata:
            continue
        group.add_argument(f"--{namespace}.{f.name}", **option_spec(f, hints[f.name], with_defaults))
        added.append(f.name)
    return added


class _DeprecatedFlag(argparse.Action):
    def __init__(self, option_strings, dest, new_flag: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new_flag = new_flag

    def __call__(self, parser, namespace, values, option_string=None):
        warnings.warn(f"{option_string} is deprecated: use {self.new_flag}", FutureWarning, stacklevel=2)
        setattr(namespace, self.dest, values)


def _action(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    for action in parser._actions:
        if flag in action.option_strings:
            return action
    raise KeyError(f"no option {flag}")


def add_deprecated_flag(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Make ``old`` set what the existing option ``new`` sets (same type, values and choices), with a
    ``FutureWarning`` saying to use ``new``. Hidden from ``--help``."""
    target = _action(parser, new)
    parser.add_argument(old, dest=target.dest, type=target.type, nargs=target.nargs, choices=target.choices,
                        default=argparse.SUPPRESS, help=argparse.SUPPRESS, action=_DeprecatedFlag, new_flag=new)


def with_new_names(argv, renamed: dict[str, str]) -> list[str]:
    """``argv`` with every option named by a key of ``renamed`` (old name -> new name, e.g.
    :func:`gaca_openrlhf.trainer.run_options.deprecated_flags`) spelt with its new name, as ``--old value`` or
    ``--old=value``; everything else unchanged. Two commands that differ only in deprecated spellings come out equal."""
    out = []
    for arg in map(str, argv):
        flag, eq, value = arg.partition("=")
        out.append(renamed[flag] + eq + value if arg.startswith("--") and flag in renamed else arg)
    return out


class AliasedNamespace(SimpleNamespace):
    """A namespace of parsed options whose deprecated attribute names still work.

    ``aliases`` maps an old attribute name to ``(home, new name, message)``: ``home`` is the namespace that now
    holds the value; ``message`` is the warning's text. Reading or setting an old name reads or sets the value there,
    with a ``DeprecationWarning``; ``vars()`` lists only the namespace's own options.
    """

    __slots__ = ("_aliases",)  # outside __dict__: vars() and repr() show the options only

    def __init__(self, values: dict, aliases: dict[str, tuple[SimpleNamespace, str, str]]):
        super().__init__(**values)
        object.__setattr__(self, "_aliases", dict(aliases))

    def _resolve(self, name: str):
        try:
            aliases = object.__getattribute__(self, "_aliases")
        except AttributeError:  # not set yet (while unpickling)
            return None
        if name not in aliases:
            return None
        home, new, message = aliases[name]
        warnings.warn(message, DeprecationWarning, stacklevel=3)
        return home, new

    def __getattr__(self, name: str):  # only called when normal lookup fails
        found = self._resolve(name)
        if found is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(*found)

    def __setattr__(self, name: str, value) -> None:
        found = None if name in self.__dict__ else self._resolve(name)
        if found is None:
            super().__setattr__(name, value)
        else:
            setattr(found[0], found[1], value)

    def __reduce__(self):  # SimpleNamespace pickles __dict__ only: keep the aliases (Ray ships args to its actors)
        return _rebuild, (type(self), dict(self.__dict__), object.__getattribute__(self, "_aliases"))


def _rebuild(cls, values: dict, aliases: dict) -> AliasedNamespace:
    return cls(values, aliases)
