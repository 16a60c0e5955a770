"""The one way a thing joins pytest-llmperf: a `Registry` per kind of thing (engine kinds,
output formats, dataset sources, load patterns, per-run breakdowns), which finds the package's
own in the modules of its package and another package's through an entry-point group, and which
a conftest or a plugin of the plugin joins by `register` (a class joins by subclassing its
kind's base class, whose `__init_subclass__` registers it here).

GuideLLM's RegistryMixin works the same way (a class-level `register` and the auto-import of a
package's modules: src/guidellm/utils/registry.py and auto_importer.py in
https://github.com/vllm-project/guidellm), and entry points are how pytest finds its own plugins
(https://docs.pytest.org/en/stable/how-to/writing_plugins.html#making-your-plugin-installable-by-others).
Measuring modes are the one thing that joins otherwise: by a pytest hook, as pytest-xdist's
schedulers do (plugin/hookspecs.py).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Things of one kind by name. `what` names the kind in errors ("breakdown"); `key` gives a
    thing's name. The first time the registry is read it imports (once) `modules`, whose things
    come first in this order, then every module of `package`, then loads the entry points of
    the group `entry_points` (another package's own); the rest follow in the order they
    registered."""

    def __init__(self, what: str, key: Callable[[T], str], *, modules: tuple[str, ...] = (),
                 package: str | None = None, entry_points: str | None = None) -> None:
        self.what, self.key = what, key
        self.modules, self.package, self.entry_points = modules, package, entry_points
        self._things: dict[str, T] = {}
        self._ordered: dict[str, T] | None = None  # all()'s answer, until one registers
        self._loaded = False

    def register(self, thing: T) -> T:
        """Add `thing` (returned, so a decorator or an assignment can use it). A name another
        thing holds is a TypeError naming both; the same class defined again (a module imported
        anew) replaces its old self."""
        name = self.key(thing)
        taken = self._things.get(name)
        if taken is not None and taken is not thing and _origin(taken) != _origin(thing):
            raise TypeError(f"{self.what} {name!r} is {_class(taken).__name__} already; give "
                            f"{_class(thing).__name__} a name of its own")
        self._things[name] = thing
        self._ordered = None
        return thing

    def all(self) -> dict[str, T]:
        """Every registered thing by name: `modules`' in their order, then the rest."""
        self._load()
        if self._ordered is None:
            place = {module: index for index, module in enumerate(self.modules)}
            self._ordered = dict(sorted(self._things.items(),
                                        key=lambda item: place.get(_origin(item[1])[0],
                                                                   len(place))))
        return dict(self._ordered)

    def get(self, name: str) -> T | None:
        self._load()
        return self._things.get(name)

    def __getitem__(self, name: str) -> T:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.all())

    def forget(self, name: str) -> None:
        """Drop `name` (a test's own registration, undone)."""
        self._things.pop(name, None)
        self._ordered = None

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True  # first: a module imported here registers through `register`
        for module in self.modules:
            importlib.import_module(module)
        if self.package is not None:
            package = importlib.import_module(self.package)
            for module in sorted(info.name for info in pkgutil.iter_modules(package.__path__)):
                importlib.import_module(f"{self.package}.{module}")
        for entry in (importlib.metadata.entry_points(group=self.entry_points)
                      if self.entry_points else ()):
            loaded = entry.load()  # a class registers on definition; an object is added here
            if self.key(loaded) not in self._things:
                self.register(loaded)


def _class(thing: object) -> type:
    """A registered class, or a registered object's class."""
    return thing if isinstance(thing, type) else type(thing)


def _origin(thing: object) -> tuple[str, str]:
    """Where a thing was defined: its class's module and qualified name."""
    return _class(thing).__module__, _class(thing).__qualname__
