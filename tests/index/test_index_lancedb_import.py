"""LanceDB imported with its REST namespace client deferred (pcm.index.deferred): nothing of the client lost."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(code: str) -> str:
    """``code`` in a fresh interpreter (what a module already imported would hide); its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    return done.stdout


def test_lancedb_imports_without_the_clients_api_classes() -> None:
    out = run("""
        import sys
        import pcm.index
        import lancedb
        loaded = sorted(m for m in sys.modules if m.startswith("lance_namespace_urllib3_client"))
        print(any(".api." in m or m.endswith(".api") for m in loaded), len(loaded))
        try:
            sys.modules["lance_namespace_urllib3_client.models"].NoSuchModel
        except AttributeError:
            print("AttributeError")
    """)
    api_loaded, count, missing = out.split()
    assert api_loaded == "False"
    assert int(count) > 0  # the few models lance_namespace names are imported: the deferral is no stub
    assert missing == "AttributeError"  # a name no model has is still an error, not a silent None


def test_the_client_is_whole_when_asked_for() -> None:
    out = run("""
        import pcm.index
        import lancedb
        import lance_namespace_urllib3_client as client
        from lance_namespace_urllib3_client.models import JsonArrowSchema
        print(client.ApiClient.__name__, client.TableApi.__name__, client.models.JsonArrowSchema is JsonArrowSchema)
        import lance_namespace_urllib3_client.models as models
        names = {}
        exec("from lance_namespace_urllib3_client.models import *", names)
        print("CreateTableRequest" in names, "JsonArrowField" in names)
        import lancedb.namespace
        print("namespace")
    """)
    assert out.split() == ["ApiClient", "TableApi", "True", "True", "True", "namespace"]
