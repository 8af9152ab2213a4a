"""Plain records for the rows a store hands across its contract, made cheaply at import.

``@dataclass(slots=True)`` costs about a millisecond a class as a module loads (it
inspects each field and compiles five or six methods, each on its own); the store's
rows are nineteen classes, loaded by every command, a read's included, where they were a
fifth of ``hivelite list``'s start. :func:`record` makes what those rows use, and no
more: ``__slots__``, an ``__init__`` taking the fields in order (defaults last), a
``__repr__``, an ``__eq__`` by class and fields, ``__match_args__``, and for a
``frozen`` record a refusal to change a field, and a hash. A class's methods are
compiled in one go when it is first used, so a command pays only for the rows it
makes. :func:`fields` and :func:`replace` stand for their ``dataclasses`` namesakes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")

class FrozenRecord(AttributeError):
    """A field of a frozen record was set or deleted (as ``dataclasses``'
    ``FrozenInstanceError``)."""


def _refuse_set(self: object, name: str, value: object) -> None:
    raise FrozenRecord(f"cannot assign to field {name!r} of a {type(self).__name__}")


def _refuse_delete(self: object, name: str) -> None:
    raise FrozenRecord(f"cannot delete field {name!r} of a {type(self).__name__}")


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
    return f"{type(self).__qualname__}({shown})"


def _getstate(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name in self.__slots__)


def _setstate(self: Any, state: tuple[Any, ...]) -> None:
    """A copied or unpickled record's fields (a frozen one's too)."""
    for name, value in zip(self.__slots__, state, strict=True):
        object.__setattr__(self, name, value)


def _make(cls: type, frozen: bool) -> type:
    names = list(vars(cls).get("__annotations__", {}))  # (inspect costs a 10 ms import)
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    seen_default = False
    for name in names:
        if name in defaults:
            seen_default = True
        elif seen_default:
            raise TypeError(f"{cls.__name__}.{name}: a field without a default follows one"
                            " with a default")
    namespace = {k: v for k, v in cls.__dict__.items()
                 if k not in defaults and k not in ("__dict__", "__weakref__")}
    namespace.update(__slots__=tuple(names), __match_args__=tuple(names), __repr__=_repr,
                     __getstate__=_getstate, __setstate__=_setstate,
                     __record__=(names, defaults, frozen), __init__=_first("__init__"),
                     __eq__=_first("__eq__"), __hash__=_first("__hash__") if frozen else None)
    if frozen:
        namespace.update(__setattr__=_refuse_set, __delattr__=_refuse_delete)
    made = type(cls)(cls.__name__, cls.__bases__, namespace)
    made.__qualname__ = cls.__qualname__
    return made


def _first(method: str) -> Callable[..., Any]:
    """A method that, called the first time, compiles the record's own methods (all in one
    go), puts them on its class, and runs: a class never used costs no compiling."""
    def first(self: Any, *args: Any, **kwargs: Any) -> Any:
        _compile(type(self))
        return getattr(type(self), method)(self, *args, **kwargs)
    first.__name__ = method
    return first


def _compile(cls: type) -> None:
    names, defaults, frozen = cls.__record__  # type: ignore[attr-defined]
    params = [f"{n}=_d_{n}" if n in defaults else n for n in names]
    setter = "object.__setattr__(self, {n!r}, {n})" if frozen else "self.{n} = {n}"
    body = "\n".join("    " + setter.format(n=n) for n in names) or "    pass"
    mine = "(" + "".join(f"self.{n}, " for n in names) + ")"
    theirs = "(" + "".join(f"other.{n}, " for n in names) + ")"
    source = (f"def __init__(self, {', '.join(params)}):\n{body}\n"
              f"def __eq__(self, other):\n"
              f"    if other.__class__ is not self.__class__:\n"
              f"        return NotImplemented\n"
              f"    return {mine} == {theirs}\n"
              f"def __hash__(self):\n    return hash({mine})\n")
    scope: dict[str, Any] = {f"_d_{n}": v for n, v in defaults.items()}
    exec(compile(source, f"<record {cls.__qualname__}>", "exec"), scope)
    for method in ("__init__", "__eq__") + (("__hash__",) if frozen else ()):
        function = scope[method]
        function.__qualname__ = f"{cls.__qualname__}.{method}"
        type.__setattr__(cls, method, function)


@dataclass_transform(frozen_default=False)
def record(*, frozen: bool = False) -> Callable[[type[T]], type[T]]:
    """A class of named fields, from its annotations (in order; a default is its class
    value): see the module's text. Fields are given positionally or by name."""
    def make(cls: type[T]) -> type[T]:
        return _make(cls, frozen)
    return make


def fields(record_or_class: object) -> tuple[str, ...]:
    """The names of a record's fields, in order."""
    cls = record_or_class if isinstance(record_or_class, type) else type(record_or_class)
    return tuple(cls.__slots__)  # type: ignore[attr-defined]


def replace(item: T, **changes: Any) -> T:
    """A copy of ``item`` with ``changes`` (a name it has no field of is refused)."""
    names = fields(item)
    unknown = set(changes) - set(names)
    if unknown:
        raise TypeError(f"{type(item).__name__} has no field {sorted(unknown)[0]!r}")
    return type(item)(**{n: changes[n] if n in changes else getattr(item, n) for n in names})


__all__ = ["FrozenRecord", "fields", "record", "replace"]
