"""LanceDB without the eager import of its REST namespace client, which pcm never uses.

``import lancedb`` (0.40) imports ``lance_namespace``, whose package imports ``lance_namespace_urllib3_client``: a
generated REST client whose package ``__init__`` imports every API class (hundreds of methods wrapped in pydantic's
``validate_call``, each building its validators at import) and whose ``models`` package imports some 270 pydantic
models. That was about 0.9 s of the 1.5 s CPU ``import lancedb`` takes, paid by every fresh process's first recall,
for a client that only LanceDB's REST namespaces use (pcm opens local tables).

:func:`defer_namespace_client` puts both packages in ``sys.modules`` unexecuted, with a module ``__getattr__``:
importing a submodule (``...models.json_arrow_schema``) works as usual; a model asked of ``models`` by name
imports only the submodule that defines it (the generator names each file after its class); anything else asked of
either package runs the package's own ``__init__`` first, so code that uses the client gets the whole of it, only
later. A release that lays the client out otherwise loses the saving, not the behaviour.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from types import ModuleType

#: The generated client ``lance_namespace`` imports eagerly.
CLIENT = "lance_namespace_urllib3_client"

_CAPITAL = re.compile(r"(?<!^)(?=[A-Z])")


def defer_namespace_client() -> None:
    """Defer the namespace client's package ``__init__`` files until something asks them for a name (see above).

    Call before LanceDB is first imported; a second call, or a call after the client was imported, does nothing.
    """
    _defer(CLIENT, by_file=False)
    _defer(CLIENT + ".models", by_file=True)


def _defer(name: str, *, by_file: bool) -> None:
    """Register package ``name`` unexecuted; ``by_file``: answer a missing name from the submodule named after it."""
    if name in sys.modules:
        return
    parent, _, child = name.rpartition(".")
    if parent and parent not in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed, or not a package in this release: nothing to defer
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(attr: str) -> object:  # noqa: N807 (a module's own __getattr__, PEP 562)
        if by_file and not attr.startswith("_"):
            submodule = _submodule(f"{name}.{_CAPITAL.sub('_', attr).lower()}")
            if submodule is not None and hasattr(submodule, attr):
                value = getattr(submodule, attr)
                setattr(module, attr, value)
                return value
        # anything else: run the package's own __init__ once, and answer from it
        module.__dict__.pop("__getattr__", None)
        loader.exec_module(module)
        return getattr(module, attr)

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[name] = module
    if parent:
        setattr(sys.modules[parent], child, module)


def _submodule(name: str) -> ModuleType | None:
    """The submodule ``name`` if it exists (a generated file per model), else None."""
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)
