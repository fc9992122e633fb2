"""The console commands of ``pip install ./python`` (ours only): the build backend
declares ``mooncake_master``, ``mooncake_http_metadata_server``,
``transfer_engine_bench``, ``mooncake_client``, ``mooncake_p2p`` and
``mooncake_conductor`` and bundles the six executables, which the commands run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import IMPL, INSTALLED, PYTHON_DIR, impl_env

pytestmark = pytest.mark.skipif(IMPL != "ours", reason="mooncake-rs packaging (ours only)")


def backend():
    spec = importlib.util.spec_from_file_location("mooncake_build", PYTHON_DIR / "_build" / "mooncake_build.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_backend_declares_the_commands(tmp_path: Path) -> None:
    b = backend()
    info = b.prepare_metadata_for_build_wheel(str(tmp_path))
    entry_points = (tmp_path / info / "entry_points.txt").read_text()
    for line in (
        "mooncake_master = mooncake.cli:main",
        "mooncake_http_metadata_server = mooncake.cli:http_metadata_server_main",
        "transfer_engine_bench = mooncake.cli:bench_main",
        "mooncake_client = mooncake.cli:client_main",
        "mooncake_p2p = mooncake.cli:p2p_main",
        "mooncake_conductor = mooncake.cli:conductor_main",
    ):
        assert line in entry_points
    assert b.BINARIES == [
        "mooncake_master",
        "mooncake_http_metadata_server",
        "transfer_engine_bench",
        "mooncake_client",
        "mooncake_p2p",
        "mooncake_conductor",
    ]


def run_entry(function: str, *args: str) -> subprocess.CompletedProcess:
    code = f"import sys; from mooncake.cli import {function}; sys.exit({function}())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=impl_env("ours"), capture_output=True, text=True, timeout=60
    )


def test_mooncake_client_runs_the_native_binary() -> None:
    from mooncake._lib import binary_path

    if binary_path("mooncake_client") is None:
        pytest.skip("mooncake_client not built: run `cargo build --bins`")
    done = run_entry("client_main", "--help")
    assert done.returncode == 0 and "Usage: mooncake_client" in done.stdout


def test_mooncake_p2p_runs_the_native_binary() -> None:
    from mooncake._lib import binary_path

    if binary_path("mooncake_p2p") is None:
        pytest.skip("mooncake_p2p not built: run `cargo build --bins`")
    done = run_entry("p2p_main", "--help")
    assert done.returncode == 0 and "Usage: mooncake_p2p" in done.stdout


def test_transfer_engine_bench_runs_the_native_binary() -> None:
    from mooncake._lib import binary_path

    if binary_path("transfer_engine_bench") is None:
        pytest.skip("transfer_engine_bench not built: run `cargo build --bins`")
    done = run_entry("bench_main", "--help")
    assert done.returncode == 0 and "Usage: transfer_engine_bench" in done.stdout + done.stderr


def test_mooncake_conductor_runs_the_native_binary() -> None:
    from mooncake._lib import binary_path

    if binary_path("mooncake_conductor") is None:
        pytest.skip("mooncake_conductor not built: run `cargo build --bins`")
    done = run_entry("conductor_main", "--help")
    assert done.returncode == 0 and "mooncake_conductor" in done.stdout + done.stderr


def test_the_wheel_is_named_after_the_crate_version(tmp_path: Path, monkeypatch) -> None:
    b = backend()
    cargo = (PYTHON_DIR.parent / "Cargo.toml").read_text()
    version = cargo.split("[package]", 1)[1].split('version = "', 1)[1].split('"', 1)[0]
    monkeypatch.setenv("MOONCAKE_WHEEL_PLATFORM", "manylinux_2_28_x86_64")
    assert b._wheel_name() == f"mooncake_rs-{version}-py3-none-manylinux_2_28_x86_64.whl"
    info = b.prepare_metadata_for_build_wheel(str(tmp_path))
    assert f"Version: {version}\n" in (tmp_path / info / "METADATA").read_text()
    assert "Tag: py3-none-manylinux_2_28_x86_64\n" in (tmp_path / info / "WHEEL").read_text()


@pytest.mark.skipif(not INSTALLED, reason="tests the installed package (MOONCAKE_PY_INSTALLED=1)")
def test_the_installed_commands_run_the_bundled_executables() -> None:
    from mooncake._lib import BUNDLE_DIR

    scripts = Path(sys.executable).parent
    for name in ("mooncake_master", "mooncake_http_metadata_server", "transfer_engine_bench",
                 "mooncake_client", "mooncake_p2p", "mooncake_conductor"):
        assert (BUNDLE_DIR / name).is_file(), f"{name} is not bundled"
        done = subprocess.run([str(scripts / name), "--help"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{name} --help: {done.returncode} {done.stderr[-500:]}"
