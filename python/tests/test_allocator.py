"""``mooncake.allocator`` and ``mooncake.fabric_allocator_utils`` (ours only: upstream's
non-CUDA wheel has no allocator module). Without CUDA libraries the allocators say
what they need; the backend probe is exercised with small native libraries built
here."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import IMPL

pytestmark = pytest.mark.skipif(IMPL != "ours", reason="upstream's non-CUDA wheel has no mooncake.allocator")


def _library(tmp_path: Path, name: str, source: str) -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a probe library")
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / f"{name}.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return str(out)


@pytest.fixture
def nvlink(monkeypatch):
    from mooncake.allocator import NVLinkAllocator

    monkeypatch.setattr(NVLinkAllocator, "_probe_done", False)
    monkeypatch.setattr(NVLinkAllocator, "_supports_fabric", NVLinkAllocator._supports_fabric)
    return NVLinkAllocator


def test_without_cuda_libraries_the_allocators_say_what_they_need(nvlink):
    import mooncake.allocator as alloc

    assert [(m.name, int(m)) for m in alloc.MemoryBackend] == [
        ("USE_CUDAMALLOC", 0),
        ("USE_CUMEMCREATE", 1),
        ("UNKNOWN", -1),
        ("UNSUPPORTED", -2),
    ]
    assert nvlink.detect_mem_backend() == alloc.MemoryBackend.UNSUPPORTED
    with pytest.raises(ImportError, match="nvlink_allocator.so"):
        nvlink.get_allocator("cuda:0")
    if not any(Path(p).exists() for p in alloc._BAREX_PATHS):
        with pytest.raises(ImportError, match="libaccl_barex.so"):
            alloc.BarexAllocator.get_allocator("cuda:0")


def test_the_backend_probe_reads_the_library(tmp_path, nvlink, monkeypatch):
    from mooncake.allocator import MemoryBackend
    from mooncake.fabric_allocator_utils import get_mooncake_so_path, probe_allocator_backend

    fabric = _library(tmp_path, "fabric", "int mc_allocator_probe(int d) { return d + 1; }\n")
    odd = _library(tmp_path, "odd", "int mc_allocator_probe(int d) { return 7; }\n")
    bare = _library(tmp_path, "bare", "int something_else(void) { return 0; }\n")
    assert probe_allocator_backend(fabric, "mc_allocator_probe", ctypes.c_int, -2) == 1
    assert probe_allocator_backend(bare, "mc_allocator_probe", ctypes.c_int, -2) == -2
    assert probe_allocator_backend(str(tmp_path / "absent.so"), "x", ctypes.c_int, -2) == -2
    with pytest.raises(ImportError, match="needs it"):
        get_mooncake_so_path("no_such_library.so", "needs it")
    for path, want in [(fabric, MemoryBackend.USE_CUMEMCREATE), (odd, MemoryBackend.UNKNOWN)]:
        monkeypatch.setattr(nvlink, "_probe_done", False)
        monkeypatch.setattr(nvlink, "_get_so_path", classmethod(lambda cls, p=path: p))
        assert nvlink.detect_mem_backend() == want
