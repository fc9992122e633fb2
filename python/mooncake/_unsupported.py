"""How mooncake-rs offers upstream names it does not support: the name exists (so
code written for upstream never fails with ``AttributeError``), and calling it raises
``NotImplementedError`` saying what is not supported and why. Classes raise when
instantiated; their methods raise when called."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, NoReturn, Optional


def unsupported(name: str, reason: str) -> NoReturn:
    """Raises the error every unsupported name raises."""
    raise NotImplementedError(f"{name} is not supported by mooncake-rs: {reason}")


def function(qualname: str, reason: str) -> Callable[..., NoReturn]:
    """A function (or method) that raises when called, whatever its arguments."""

    def call(*args: Any, **kwargs: Any) -> NoReturn:
        unsupported(qualname, reason)

    call.__name__ = qualname.rpartition(".")[2]
    call.__qualname__ = qualname
    call.__doc__ = f"Not supported by mooncake-rs: {reason}."
    return call


def methods(owner: str, names: Iterable[str], reason: str) -> Dict[str, Callable[..., NoReturn]]:
    """``{name: raising method}`` for the methods ``names`` of class ``owner``."""
    return {n: function(f"{owner}.{n}", reason) for n in names}


def stub_class(
    module: str,
    name: str,
    reason: str,
    members: Iterable[str] = (),
    static: Optional[Dict[str, Callable[..., Any]]] = None,
    properties: Iterable[str] = (),
) -> type:
    """A class whose constructor, ``members`` (methods) and ``properties`` raise;
    ``static`` adds static methods that work (e.g. a ``supported()`` answering
    False)."""
    ns: Dict[str, Any] = {"__module__": module, "__doc__": f"Not supported by mooncake-rs: {reason}."}
    ns["__init__"] = function(name, reason)
    ns.update(methods(name, members, reason))
    ns.update({p: property(function(f"{name}.{p}", reason)) for p in properties})
    for n, fn in (static or {}).items():
        ns[n] = staticmethod(fn)
    return type(name, (), ns)
