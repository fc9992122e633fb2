"""The argument rules of ``MooncakeDistributedStore.setup``: the positional form's
signature, and the dictionary form's parsing as upstream's ``setup(config: dict)``
does it (every value read as its ``str()``; sizes with unit suffixes; booleans
spelled ``true``/``false``/``yes``/``no``/``on``/``off``/``1``/``0``)."""

from __future__ import annotations

import os
import re
import sys
import warnings
from typing import Any, Dict, NamedTuple, Optional

U64_MAX = (1 << 64) - 1
#: Upstream's MIN_SEGMENT_SIZE / MAX_SEGMENT_SIZE (the latter bounds the local buffer).
MIN_SIZE = 1024
MAX_LOCAL_BUFFER = 1 << 40
#: Upstream's defaults for the dictionary form.
DEFAULT_SIZE = 16 << 20
DEFAULT_MASTER = "127.0.0.1:50051"
#: The dictionary form's keys and the other names the serving integrations put in
#: their config dicts for them (LMCache passes its ``mooncake`` section as is; SGLang's
#: and vLLM's ``mooncake.json`` use the same names): the first key present wins.
ALIASES = {
    "master_server_addr": ("master_server_addr", "master_server_address"),
    "rdma_devices": ("rdma_devices", "device_name"),
}

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
# Upstream's units, plus the IEC spellings (KiB, MiB, ...) as an extension.
_UNITS = {"": 1, "B": 1}
for _i, _u in enumerate("KMGT", start=1):
    for _spelling in (_u, _u + "B", _u + "IB"):
        _UNITS[_spelling] = 1 << (10 * _i)
del _i, _u, _spelling
_TRUE = {"true", "1", "yes", "on", "enable"}
_FALSE = {"false", "0", "no", "off", "disable"}


def setup_args(
    local_hostname: str,
    metadata_server: str,
    global_segment_size: int,
    local_buffer_size: int,
    protocol: str,
    rdma_devices: str,
    master_server_addr: str,
    engine: Any = None,
    enable_ssd_offload: bool = False,
    ssd_offload_path: str = "",
    tenant_id: str = "default",
    enable_client_http_server: bool = False,
    client_http_port: int = 9300,
) -> Dict[str, Any]:
    """The positional form's arguments by name (``TypeError`` for a wrong arity or
    an unknown keyword, as a Python call)."""
    return dict(locals())


def parse_size(value: Any) -> Optional[int]:
    """A byte size from ``str(value)``: a number (``1e6``, ``1.5``) and an optional
    unit, case-insensitive (``B``, ``K``/``KB``, ``M``/``MB``, ``G``/``GB``,
    ``T``/``TB``; also ``KiB`` ... ``TiB``), or ``infinite``. None when it is not one
    (negative, unknown unit, not a number)."""
    text = str(value).strip()
    if text == "infinite":
        return U64_MAX
    m = _NUMBER.match(text)
    if m is None:
        return None
    number = float(m.group())
    unit = _UNITS.get(text[m.end():].strip().upper())
    if number < 0 or unit is None:
        return None
    size = int(number * unit)
    return size if size <= U64_MAX else None


def parse_bool(value: Any, default: bool) -> bool:
    """A boolean from ``str(value)``; unrecognised spellings give ``default``."""
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return default


class DictSetup(NamedTuple):
    """The dictionary form's values, ready for the native setup."""

    host: bytes
    metadata: bytes
    segment: int
    buffer: int
    protocol: bytes
    devices: bytes
    master: bytes
    options: Dict[str, Any]


def dict_setup(config: Dict[Any, Any]) -> Optional[DictSetup]:
    """Parses ``setup(config: dict)``; None where upstream returns -600 (a missing
    ``local_hostname`` or ``metadata_server``, a size that does not parse or is out
    of range, a ``client_http_port`` that is not an integer). ``master_server_address``
    and ``device_name`` are read as ``master_server_addr`` and ``rdma_devices``
    (:data:`ALIASES`)."""
    values = {str(k): str(v) for k, v in config.items()}
    host, meta = values.get("local_hostname", ""), values.get("metadata_server", "")
    segment = parse_size(values.get("global_segment_size", DEFAULT_SIZE))
    buffer = parse_size(values.get("local_buffer_size", DEFAULT_SIZE))
    if not host or not meta or segment is None or buffer is None:
        return None
    if 0 < segment < MIN_SIZE or 0 < buffer < MIN_SIZE or buffer > MAX_LOCAL_BUFFER:
        return None
    port = values.get("client_http_port", "9300").strip()
    if not re.fullmatch(r"[+-]?\d+", port) or not -(1 << 31) <= int(port) < 1 << 31:
        return None
    master = _first(values, "master_server_addr")
    options = {
        "enable_ssd_offload": parse_bool(values.get("enable_ssd_offload", ""), False),
        "ssd_offload_path": values.get("ssd_offload_path", ""),
        "tenant_id": values.get("tenant_id", "default"),
        "enable_client_http_server": parse_bool(values.get("enable_client_http_server", ""), False),
        "client_http_port": int(port),
        "ipc_socket_path": values.get("ipc_socket_path", ""),
    }
    return DictSetup(
        host.encode(),
        meta.encode(),
        segment,
        buffer,
        values.get("protocol", "tcp").encode(),
        (_first(values, "rdma_devices") or "").encode(),
        (DEFAULT_MASTER if master is None else master).encode(),
        options,
    )


def _first(values: Dict[str, str], key: str) -> Optional[str]:
    """The value of ``key`` or of its first alias present (:data:`ALIASES`)."""
    return next((values[k] for k in ALIASES[key] if k in values), None)


def warn_unsupported(what: str) -> None:
    """Warns, attributing the warning to the first caller outside this package."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(0), 1
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == package:
        frame, level = frame.f_back, level + 1
    warnings.warn(f"mooncake.store: {what} is not supported by mooncake-rs; ignored", stacklevel=level)
