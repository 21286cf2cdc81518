"""``toolhost.deerflow.community.<provider>.tools``: DeerFlow's community tools
(``deerflow.community.<provider>.tools:<tool>_tool``) run by toolhost's ``community``
component. Which providers and tools exist is toolhost's to say (``toolhost tools --explain``
lists them); a module here exists for any provider name, and a tool the config does not
assemble is an error naming what it does assemble."""

import importlib.abc
import importlib.machinery
import sys
import types

from .._door import module_tools

_PREFIX = __name__ + "."


class _ProviderModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes ``toolhost.deerflow.community.<provider>`` and its ``.tools`` on import."""

    def find_spec(self, fullname, path=None, target=None):
        rest = fullname[len(_PREFIX) :] if fullname.startswith(_PREFIX) else None
        if not rest:
            return None
        parts = rest.split(".")
        if not all(p.isidentifier() for p in parts) or len(parts) > 2 or (len(parts) == 2 and parts[1] != "tools"):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=len(parts) == 1)

    def create_module(self, spec):
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__.endswith(".tools"):
            cache: dict = {}
            module.__getattr__ = lambda variable: module_tools(variable, cache)  # type: ignore[attr-defined]
            module.__doc__ = f"DeerFlow's {module.__name__[len('toolhost.') :]}, run by toolhost."
        else:
            module.__path__ = []  # a package, so that `.tools` can be imported from it


if not any(isinstance(f, _ProviderModules) for f in sys.meta_path):
    sys.meta_path.append(_ProviderModules())
