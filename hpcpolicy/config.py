"""``Config``: the base of every frozen config, which checks each field's type before its range.

A config is a frozen dataclass whose fields are annotated with ``int``, ``float``, ``bool``,
``str``, ``tuple[T, ...]``, ``tuple[A, B]``, ``X | None``, a union of these, or another
``Config``. Building one checks every value against its annotation first, then the
config's own rules (:meth:`Config.validate`), so a range check never meets a list where it
expects a number. The type rules are stricter than Python's: ``True`` is not an integer,
a float must be finite (``NaN`` and ``Infinity`` parse from JSON and TOML), and an integer
must fit in 64 bits, as NumPy and torch hold it (seeds use the whole range); a field made
with :func:`choice` must also hold one of its listed values.

:meth:`Config.from_dict` reads a parsed JSON (or TOML) object: it refuses unknown keys,
naming them and the known ones, and turns lists into tuples where a field is a tuple. Every
refusal is one :class:`~hpcpolicy.errors.ConfigError` line that names the field.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Toy(Config):
    ...     label = "toy"
    ...     rate: float = 0.5
    ...     widths: tuple[int, ...] = (4,)
    ...     def validate(self) -> None:
    ...         self._require(self.rate > 0, "rate", f"must be > 0, got {self.rate}")
    >>> Toy.from_dict({"widths": [8, 2]}).widths
    (8, 2)
    >>> Toy.from_dict({"rate": "fast"})
    Traceback (most recent call last):
    ...
    hpcpolicy.errors.ConfigError: toy config field `rate`: must be a number, got 'fast'
    >>> Toy.from_dict({"rate": float("inf")})
    Traceback (most recent call last):
    ...
    hpcpolicy.errors.ConfigError: toy config field `rate`: must be a finite number, got inf
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, Union

from hpcpolicy.docload import read_json
from hpcpolicy.errors import ConfigError

__all__ = ["MAX_INT", "Config", "choice", "read_json_object"]

MAX_INT = 2**63 - 1
"""Largest integer magnitude a config accepts: a signed 64-bit integer, beyond which NumPy
and torch raise OverflowError."""

_CHOICES = "choices"
"""Key of a field's metadata that lists its allowed values (see :func:`choice`)."""


def choice(default: Any, options: Iterable[Any]) -> Any:
    """A dataclass field whose value (when not None) must be one of ``options``.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class Net(Config):
        ...     activation: str = choice("tanh", ("tanh", "relu"))
        >>> Net(activation="gelu")
        Traceback (most recent call last):
        ...
        hpcpolicy.errors.ConfigError: activation 'gelu' is not one of tanh, relu
    """
    return dataclasses.field(default=default, metadata={_CHOICES: tuple(options)})


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object a file the program wrote holds (a run's or a tune's record).

    Raises:
        ConfigError: One line naming the file, when it cannot be read, is not JSON, or holds
            something other than an object.
    """
    try:
        data = read_json(path, "record")
    except ConfigError as exc:
        raise ConfigError(f"{path}: cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _shown(value: Any) -> str:
    """``value`` as written (tuples as lists), cut so that a message stays one line."""
    text = repr(_to_json(value))
    return text if len(text) <= 60 else text[:57] + "..."


def _arms(hint: Any) -> tuple[Any, ...] | None:
    """The members of a union annotation (``X | Y``, ``Optional[X]``), else None."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is Union:
        return typing.get_args(hint)
    return None


_PLURALS = {int: "integers", float: "numbers", str: "strings", bool: "booleans"}


def _describe(hint: Any) -> str:
    """What a value of ``hint`` is, in words (for messages)."""
    arms = _arms(hint)
    if arms is not None:
        return " or ".join(_describe(a) for a in arms)
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_PLURALS.get(args[0], _describe(args[0]) + ' items')}"
        if len(set(args)) == 1 and args[0] in _PLURALS:
            return f"a list of {len(args)} {_PLURALS[args[0]]}"
        return f"a list of {len(args)} items: " + ", ".join(_describe(a) for a in args)
    if typing.get_origin(hint) is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(hint)))
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string",
             type(None): "null"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the annotated type ``hint`` (see the module's rules)."""
    arms = _arms(hint)
    if arms is not None:
        return any(_fits(value, a) for a in arms)
    if hint is Any:
        return True
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_INT
    if hint is float:
        if isinstance(value, float):
            return math.isfinite(value)
        return _fits(value, int)
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) for v in value)
        return len(value) == len(args) and all(
            _fits(v, a) for v, a in zip(value, args, strict=True))
    if origin is Literal:
        return any(type(value) is type(a) and value == a for a in typing.get_args(hint))
    return isinstance(value, origin or hint)


def _why_not(value: Any, hint: Any) -> str:
    """Why ``value`` does not fit ``hint``: the expected type, and what came."""
    if isinstance(value, float) and not math.isfinite(value) and _fits(1.0, hint):
        return f"must be a finite number, got {_shown(value)}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT \
            and _fits(1, hint):
        return f"must be an integer of magnitude at most 2**63 - 1, got {_shown(value)}"
    return f"must be {_describe(hint)}, got {_shown(value)}"


def _from_json(value: Any, hint: Any) -> Any:
    """``value`` as parsed from JSON, made fit for ``hint``: lists become tuples, objects
    become nested configs; anything else is left for the type check."""
    arms = _arms(hint)
    if arms is not None:
        fitting = [a for a in arms if a is not type(None)]
        return _from_json(value, fitting[0]) if value is not None and len(fitting) == 1 \
            else value
    if typing.get_origin(hint) is tuple and isinstance(value, list):
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_json(v, args[0]) for v in value)
        if len(args) == len(value):
            return tuple(_from_json(v, a) for v, a in zip(value, args, strict=True))
        return tuple(value)
    if isinstance(hint, type) and issubclass(hint, Config) and isinstance(value, Mapping):
        return hint.from_dict(value)
    return value


_HINTS: dict[type, dict[str, Any]] = {}
"""Resolved field annotations by config class (see :func:`_hints`)."""


def _hints(cls: type[Config]) -> dict[str, Any]:
    """The resolved annotations of ``cls``'s fields (string annotations evaluated once)."""
    if cls not in _HINTS:
        hints = typing.get_type_hints(cls)
        _HINTS[cls] = {f.name: hints[f.name] for f in dataclasses.fields(cls)}
    return _HINTS[cls]


@dataclasses.dataclass(frozen=True)
class Config:
    """Base of the frozen configs: field types checked on construction, then :meth:`validate`.

    A subclass is a ``@dataclass(frozen=True)`` that declares its fields, sets :attr:`label`
    (which config a message is about), and overrides :meth:`validate` with its ranges and the
    rules between fields, calling ``super().validate()`` when it extends another config.
    """

    label: ClassVar[str] = ""
    """Names the config in messages (``ppo`` gives "ppo config field `gamma`: ...")."""

    def __post_init__(self) -> None:
        for name, hint in _hints(type(self)).items():
            value = getattr(self, name)
            if not _fits(value, hint):
                raise self._error(name, _why_not(value, hint))
        for f in dataclasses.fields(self):
            if _CHOICES in f.metadata:
                self._one_of(f.name, f.metadata[_CHOICES])
        self.validate()

    def validate(self) -> None:
        """Check ranges and the rules between fields (types are already right).

        Raises:
            ConfigError: naming the field (use :meth:`_require`).
        """

    def _error(self, name: str, message: str) -> ConfigError:
        prefix = f"{self.label} " if self.label else ""
        return ConfigError(f"{prefix}config field `{name}`: {message}")

    def _require(self, ok: bool, name: str, message: str) -> None:
        """Raise ConfigError naming field ``name`` when ``ok`` is false."""
        if not ok:
            raise self._error(name, message)

    def _one_of(self, name: str, options: Iterable[Any], also: str = "") -> None:
        """Require field ``name`` to be None or one of ``options`` (``also``: what else the
        message should offer)."""
        value, options = getattr(self, name), tuple(options)
        if value is not None and value not in options:
            prefix = f"{self.label} " if self.label else ""
            raise ConfigError(f"{prefix}{name} {_shown(value)} is not one of "
                              f"{', '.join(map(str, options))}{also}")

    def _at_least(self, minimum: float, *names: str) -> None:
        """Require each of the fields ``names`` (None aside) to be >= ``minimum``."""
        for name in names:
            value = getattr(self, name)
            self._require(value is None or value >= minimum, name,
                          f"must be >= {minimum}, got {value}")

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The config's fields, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> typing.Self:
        """Build from a parsed JSON/TOML object (e.g. :meth:`to_dict` output or a ``--config``
        file), lists read as tuples.

        Raises:
            ConfigError: ``data`` is not an object, has unknown keys (the message lists the
                known ones) or lacks a field without a default, or holds a value of the
                wrong type or out of range.
        """
        what = f"{cls.label} config" if cls.label else "config"
        if not isinstance(data, Mapping):
            raise ConfigError(f"{what}: expected an object of fields, got {_shown(data)}")
        hints = _hints(cls)
        unknown = sorted(str(k) for k in set(data) - set(hints))
        if unknown:
            raise ConfigError(f"{what}: unknown field(s) {', '.join(unknown)}; valid: "
                              f"{', '.join(sorted(hints))}")
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in data
                   and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        if missing:
            raise ConfigError(f"{what}: missing field(s) {', '.join(missing)}")
        return cls(**{k: _from_json(v, hints[k]) for k, v in data.items()})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: fields by name, tuples as lists, nested configs as dicts."""
        return {f.name: _to_json(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _to_json(value: Any) -> Any:
    if isinstance(value, Config):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_to_json(v) for v in value]
    return value
