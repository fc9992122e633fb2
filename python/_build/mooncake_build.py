"""In-tree PEP 517 build backend for the ``mooncake`` Python package.

``pip install ./python`` (run from the repository root) calls :func:`build_wheel`,
which

1. runs ``cargo build --release --lib --bin mooncake_master --bin
   mooncake_http_metadata_server --bin transfer_engine_bench --bin mooncake_client
   --bin mooncake_p2p --bin mooncake_conductor``
   in the repository root (offline works: cargo only uses the network for crates it
   does not have yet);
2. writes a wheel holding the pure-Python package ``python/mooncake`` plus, under
   ``mooncake/lib/``, ``libmooncake.so`` and the six executables;
3. declares the console scripts ``mooncake_master``,
   ``mooncake_http_metadata_server``, ``transfer_engine_bench``, ``mooncake_client``,
   ``mooncake_p2p`` and ``mooncake_conductor``, which run the bundled executables.

The version is the crate's (``Cargo.toml``).

The backend needs nothing but the standard library, so pip's isolated build
environment downloads nothing. ``pip install -e ./python`` (PEP 660) builds the
library the same way and installs a ``.pth`` pointing at ``python/``; the package then
loads the library from ``target/``.

Environment knobs:

* ``MOONCAKE_CARGO``: the cargo executable (default: ``$CARGO``, ``cargo`` on PATH,
  ``~/.cargo/bin/cargo``);
* ``MOONCAKE_CARGO_PROFILE``: ``release`` (default) or ``dev`` (faster to build);
* ``MOONCAKE_CARGO_ARGS``: extra arguments for ``cargo build`` (e.g. ``--offline``);
* ``MOONCAKE_SKIP_CARGO_BUILD=1``: package the artifacts already in ``target/``;
* ``MOONCAKE_ARTIFACT_DIR``: package the library and executables of this directory
  (built elsewhere, e.g. by ``scripts/build-wheel.sh`` against glibc 2.28) without
  running cargo;
* ``MOONCAKE_WHEEL_PLATFORM``: the wheel's platform tag (default: this interpreter's
  platform, e.g. ``linux_x86_64``; ``scripts/build-wheel.sh`` sets
  ``manylinux_2_28_x86_64``, which its build meets);
* ``MOONCAKE_REPO_ROOT``: the repository root (default: the parent of ``python/``);
* ``CARGO_TARGET_DIR``: honoured like cargo does.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

NAME = "mooncake-rs"
SUMMARY = (
    "Mooncake Transfer Engine and Store Python API (mooncake.engine, mooncake.store) "
    "over libmooncake, a Rust reimplementation of Mooncake"
)
REQUIRES_PYTHON = ">=3.8"
LIBRARY = "libmooncake.so"
BINARIES = [
    "mooncake_master",
    "mooncake_http_metadata_server",
    "transfer_engine_bench",
    "mooncake_client",
    "mooncake_p2p",
    "mooncake_conductor",
]
CONSOLE_SCRIPTS = {
    "mooncake_master": "mooncake.cli:main",
    "mooncake_http_metadata_server": "mooncake.cli:http_metadata_server_main",
    "transfer_engine_bench": "mooncake.cli:bench_main",
    "mooncake_client": "mooncake.cli:client_main",
    "mooncake_p2p": "mooncake.cli:p2p_main",
    "mooncake_conductor": "mooncake.cli:conductor_main",
}

PYTHON_DIR = Path(__file__).resolve().parent.parent
PACKAGE_DIR = PYTHON_DIR / "mooncake"


# --- the Rust build ----------------------------------------------------------------


def _repo_root() -> Path:
    env = os.environ.get("MOONCAKE_REPO_ROOT")
    root = Path(env).resolve() if env else PYTHON_DIR.parent
    if not (root / "Cargo.toml").is_file():
        raise RuntimeError(
            f"no Cargo.toml in {root}: build the package from the mooncake repository "
            "(`pip install ./python` in its root) or set MOONCAKE_REPO_ROOT"
        )
    return root


def _version() -> str:
    """The crate's version, from the ``[package]`` table of ``Cargo.toml``."""
    text = (_repo_root() / "Cargo.toml").read_text(encoding="utf-8")
    package = text.split("[package]", 1)[-1].split("\n[", 1)[0]
    found = re.search(r'^version\s*=\s*"([^"]+)"', package, re.MULTILINE)
    if not found:
        raise RuntimeError("no version in Cargo.toml's [package] table")
    return found.group(1)


def _cargo() -> str:
    for candidate in (os.environ.get("MOONCAKE_CARGO"), os.environ.get("CARGO")):
        if candidate:
            return candidate
    found = shutil.which("cargo")
    if found:
        return found
    home = Path.home() / ".cargo" / "bin" / "cargo"
    if home.is_file():
        return str(home)
    raise RuntimeError("cargo not found: install Rust (https://rustup.rs) or set MOONCAKE_CARGO")


def _profile() -> Tuple[str, str]:
    """(cargo --profile name, target subdirectory)."""
    profile = os.environ.get("MOONCAKE_CARGO_PROFILE", "release")
    if profile in ("dev", "debug"):
        return "dev", "debug"
    return profile, profile


def _target_dir(root: Path) -> Path:
    env = os.environ.get("CARGO_TARGET_DIR")
    if env:
        path = Path(env)
        return path if path.is_absolute() else root / path
    return root / "target"


def _cargo_build(binaries: List[str]) -> Path:
    """Builds the library (and binaries); returns the artifact directory."""
    prebuilt = os.environ.get("MOONCAKE_ARTIFACT_DIR")
    if prebuilt:
        return Path(prebuilt).resolve()
    root = _repo_root()
    profile, subdir = _profile()
    out = _target_dir(root) / subdir
    if os.environ.get("MOONCAKE_SKIP_CARGO_BUILD") not in (None, "", "0"):
        return out
    cmd = [_cargo(), "build", "--profile", profile, "--lib"]
    for b in binaries:
        cmd += ["--bin", b]
    cmd += shlex.split(os.environ.get("MOONCAKE_CARGO_ARGS", ""))
    print(f"mooncake_build: {' '.join(cmd)} (in {root})", file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=root, check=True)
    return out


def _artifacts(out: Path, binaries: List[str]) -> Dict[str, Path]:
    found = {LIBRARY: out / LIBRARY}
    for b in binaries:
        found[b] = out / b
    missing = [str(p) for p in found.values() if not p.is_file()]
    if missing:
        raise RuntimeError(f"cargo artifacts missing: {', '.join(missing)}")
    return found


# --- wheel writing -----------------------------------------------------------------


def _tag() -> str:
    platform = os.environ.get("MOONCAKE_WHEEL_PLATFORM") or sysconfig.get_platform()
    return "py3-none-" + platform.replace("-", "_").replace(".", "_")


def _dist_info() -> str:
    return f"{NAME.replace('-', '_')}-{_version()}.dist-info"


def _wheel_name() -> str:
    return f"{NAME.replace('-', '_')}-{_version()}-{_tag()}.whl"


def _metadata() -> str:
    readme = PYTHON_DIR / "README.md"
    body = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {_version()}",
        f"Summary: {SUMMARY}",
        "License: Apache-2.0",
        f"Requires-Python: {REQUIRES_PYTHON}",
        "Description-Content-Type: text/markdown",
    ]
    return "\n".join(lines) + "\n\n" + body


def _entry_points() -> str:
    lines = ["[console_scripts]"]
    lines += [f"{k} = {v}" for k, v in CONSOLE_SCRIPTS.items()]
    return "\n".join(lines) + "\n"


def _wheel_file(tag: str) -> str:
    return (
        "Wheel-Version: 1.0\n"
        "Generator: mooncake_build\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {tag}\n"
    )


def _write_metadata_dir(directory: Path, tag: str) -> str:
    name = _dist_info()
    d = directory / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text(_metadata(), encoding="utf-8")
    (d / "WHEEL").write_text(_wheel_file(tag), encoding="utf-8")
    (d / "entry_points.txt").write_text(_entry_points(), encoding="utf-8")
    (d / "top_level.txt").write_text("mooncake\n", encoding="utf-8")
    return name


class _Wheel:
    def __init__(self, path: Path) -> None:
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.records: List[str] = []

    def add(self, arcname: str, data: bytes, executable: bool = False) -> None:
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        mode = 0o755 if executable else 0o644
        info.external_attr = (stat.S_IFREG | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        self.records.append(f"{arcname},sha256={digest.decode()},{len(data)}")

    def close(self, record: str) -> None:
        self.records.append(f"{record},,")
        info = zipfile.ZipInfo(record, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (stat.S_IFREG | 0o644) << 16
        self.zip.writestr(info, "\n".join(self.records) + "\n")
        self.zip.close()


def _python_files() -> List[Path]:
    files = []
    for path in sorted(PACKAGE_DIR.rglob("*")):
        rel = path.relative_to(PACKAGE_DIR)
        if not path.is_file() or "__pycache__" in rel.parts or rel.parts[0] == "lib":
            continue
        if path.suffix in (".py", ".typed", ".pyi"):
            files.append(path)
    return files


def _build(wheel_directory: str, editable: bool) -> str:
    tag = _tag()
    if editable:
        _cargo_build(BINARIES)
    else:
        artifacts = _artifacts(_cargo_build(BINARIES), BINARIES)
    out = Path(wheel_directory)
    out.mkdir(parents=True, exist_ok=True)
    name = _wheel_name()
    wheel = _Wheel(out / name)
    try:
        if editable:
            wheel.add(f"{NAME.replace('-', '_')}.pth", (str(PYTHON_DIR) + "\n").encode())
        else:
            for path in _python_files():
                rel = path.relative_to(PYTHON_DIR).as_posix()
                wheel.add(rel, path.read_bytes())
            for fname, path in artifacts.items():
                wheel.add(f"mooncake/lib/{fname}", path.read_bytes(), executable=True)
        info = _dist_info()
        wheel.add(f"{info}/METADATA", _metadata().encode())
        wheel.add(f"{info}/WHEEL", _wheel_file(tag).encode())
        wheel.add(f"{info}/entry_points.txt", _entry_points().encode())
        wheel.add(f"{info}/top_level.txt", b"mooncake\n")
        wheel.close(f"{info}/RECORD")
    except BaseException:
        wheel.zip.close()
        (out / name).unlink(missing_ok=True)
        raise
    return name


# --- PEP 517 / PEP 660 hooks -------------------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: Optional[dict] = None
) -> str:
    return _write_metadata_dir(Path(metadata_directory), _tag())


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: Optional[dict] = None
) -> str:
    return _write_metadata_dir(Path(metadata_directory), _tag())


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[dict] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    return _build(wheel_directory, editable=False)


def build_editable(
    wheel_directory: str,
    config_settings: Optional[dict] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    return _build(wheel_directory, editable=True)


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    raise RuntimeError(
        "mooncake-rs has no standalone source distribution: the package bundles the Rust "
        "library built from the whole repository. Install from the repository with "
        "`pip install ./python`."
    )
