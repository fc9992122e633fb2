"""The package surface against the name-by-name table of ``python/README.md``
("Upstream's API, name by name"): every listed name exists in the implementation
under test (so both passes check the table against reality), every name of
upstream's wheel is listed (needs the peer venv), and every name marked "not
supported" raises ``NotImplementedError`` here (ours only). Also the package-level
exports of upstream's ``mooncake/__init__.py``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import subprocess
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from conftest import IMPL, PYTHON_DIR, impl_env, peer_venv

OURS = IMPL == "ours"
README = PYTHON_DIR / "README.md"

Row = Tuple[str, str, str]  # (base, name, status)


def readme_rows() -> List[Row]:
    """(base object path, name relative to it, status) for every name in the tables
    of the name-by-name section; a table's base is the last `code` span of its
    heading."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Upstream's API, name by name", 1)[1].split("\n## ", 1)[0]
    rows: List[Row] = []
    base = None
    for line in section.splitlines():
        if line.startswith("### "):
            spans = re.findall(r"`([^`]+)`", line)
            base = spans[-1] if spans and spans[-1].startswith("mooncake") else None
        elif base and line.startswith("| `"):
            names, status = line.strip("|").split("|", 1)
            rows += [(base, n, status.strip()) for n in re.findall(r"`([^`]+)`", names)]
    assert len(rows) > 250, "the README table was not found or is truncated"
    return rows


def resolve(path: str) -> Any:
    """The object at a dotted path (the longest importable module, then attributes)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(path)


def has_name(owner: Any, name: str) -> bool:
    """Whether ``owner`` offers ``name``: as an attribute, or on an instance (plain
    attributes set by the constructor) or a member (enums)."""
    if hasattr(owner, name):
        return True
    if isinstance(owner, type):
        members = getattr(owner, "__members__", None)
        if members:
            return hasattr(next(iter(members.values())), name)
        try:
            return hasattr(owner(), name)
        except Exception:
            return False
    return False


def split(base: str, name: str) -> Tuple[Any, str]:
    """(owner object, attribute) of README name ``name`` under ``base``."""
    owner_path, _, attr = f"{base}.{name}".rpartition(".")
    return resolve(owner_path), attr


def test_every_listed_name_exists() -> None:
    missing = [f"{b}.{n}" for b, n, _ in readme_rows() if not has_name(*split(b, n))]
    assert not missing, f"listed in python/README.md but missing in {IMPL}: {missing}"


UPSTREAM_DUMP = r"""
import importlib, json
out = []
for modname in ("mooncake", "mooncake.store", "mooncake.engine"):
    mod = importlib.import_module(modname)
    for n in dir(mod):
        if n.startswith("__"):
            continue
        out.append(f"{modname}.{n}")
        cls = getattr(mod, n)
        if isinstance(cls, type):
            for m in dir(cls):
                if not m.startswith("__") and m != "_pybind11_conduit_v1_":
                    out.append(f"{cls.__module__}.{cls.__name__}.{m}")
print(json.dumps(sorted(set(out))))
"""


def test_every_upstream_name_is_listed() -> None:
    venv = peer_venv()
    if venv is None:
        pytest.skip("no peer venv with upstream's wheel")
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", UPSTREAM_DUMP],
        env=impl_env("upstream"),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    upstream = json.loads(out.strip().splitlines()[-1])
    listed = {f"{b}.{n}" for b, n, _ in readme_rows()}
    missing = [n for n in upstream if n not in listed]
    assert not missing, f"upstream names missing from python/README.md: {missing}"


def unsupported_rows() -> Iterator[Tuple[str, Any, str]]:
    for base, name, status in readme_rows():
        if status.startswith("not supported"):
            owner, attr = split(base, name)
            yield f"{base}.{name}", owner, attr


@pytest.mark.skipif(not OURS, reason="upstream supports these (ours only)")
def test_unsupported_names_raise_not_implemented() -> None:
    from mooncake.store import MooncakeDistributedStore

    store = MooncakeDistributedStore()
    checked = 0
    for path, owner, attr in unsupported_rows():
        raw = inspect.getattr_static(owner, attr)
        if owner is MooncakeDistributedStore:
            call = getattr(store, attr)
        elif isinstance(raw, property):
            call = lambda raw=raw: raw.fget(None)  # noqa: E731
        elif isinstance(owner, type) and not isinstance(raw, (staticmethod, type)):
            call = lambda raw=raw: raw(None)  # noqa: E731
        else:
            call = getattr(owner, attr)
        with pytest.raises(NotImplementedError, match="not supported by mooncake-rs"):
            call()
        checked += 1
    assert checked > 10  # a floor against a README table that was not parsed


def test_package_exports_buffer_pools() -> None:
    import mooncake
    import mooncake.buffer_pool
    import mooncake.store

    assert mooncake.BufferPool is mooncake.store.BufferPool is mooncake.buffer_pool.BufferPool
    assert mooncake.RegisteredBufferPool is mooncake.BufferPool
    assert set(mooncake.__all__) == {"BufferPool", "RegisteredBufferPool"}
    namespace: Dict[str, Any] = {}
    exec("from mooncake import BufferPool, RegisteredBufferPool", namespace)  # the reported failure
    assert namespace["RegisteredBufferPool"] is namespace["BufferPool"] is mooncake.BufferPool


def test_store_module_enum_members_as_upstream() -> None:
    import mooncake.store as ms

    assert ms.FAILED is ms.TaskStatus.FAILED and ms.PROCESSING is ms.TaskStatus.PROCESSING
    assert ms.COMPLETE is ms.ReplicaStatus.COMPLETE and ms.KVCACHE is ms.ObjectDataType.KVCACHE
    assert [(m, int(v)) for m, v in ms.TaskStatus.__members__.items()] == [
        ("PENDING", 0), ("PROCESSING", 1), ("SUCCESS", 3), ("FAILED", 2),
    ]
    r = ms.QueryTaskResponse()
    assert r.status == ms.TaskStatus.PENDING and r.type == ms.TaskType.REPLICA_COPY and r.message == ""
    a = ms.ParallelAxis()
    assert (a.kind, a.rank, a.size, a.split_dim) == ("", 0, 1, None)
    assert ms.ReadTarget().mode == "as_stored" and ms.TensorParallelism().axes == []
    assert ms.EngramStoreConfig().embedding_dim == 64


def test_engine_shared_segment_support_query() -> None:
    import mooncake.engine as me

    assert me.SharedSegment.supported() in (True, False)
    if OURS:
        assert me.SharedSegment.supported() is False
    assert me.CoroRPCInterface is me.RpcInterface


def test_table_statuses_are_known() -> None:
    statuses: Dict[str, int] = {}
    for _, _, status in readme_rows():
        kind = "not supported" if status.startswith("not supported") else status.split(" ")[0].rstrip(":;,.")
        statuses[kind] = statuses.get(kind, 0) + 1
    assert set(statuses) <= {"supported", "not supported"}, statuses
