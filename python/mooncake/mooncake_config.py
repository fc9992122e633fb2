"""Mooncake's configuration loader (upstream's ``mooncake.mooncake_config``): a
:class:`MooncakeConfig` from a JSON file (:meth:`MooncakeConfig.from_file`) or from
the environment (:meth:`MooncakeConfig.load_from_env`: the file named by
``MOONCAKE_CONFIG_PATH``, else the ``MOONCAKE_*`` variables), with upstream's keys,
defaults and validation (``ValueError`` for a bad value).

A JSON file holds ``local_hostname``, ``metadata_server`` and
``master_server_address`` (required), ``global_segment_size`` (default 3.125 GiB) and
``local_buffer_size`` (1 GiB) as integers or strings such as ``"4GB"``, ``"512 mb"``,
``"1.5g"`` (also ``"16MiB"`` here), ``protocol`` (``tcp``), ``device_name``,
``enable_ssd_offload``, ``ssd_offload_path``, ``tenant_id``,
``enable_client_http_server``, ``client_http_port`` (9300). Booleans may be written as
``true``/``false``/``yes``/``no``/``on``/``off``/``1``/``0``.

The protocol is lower-cased; an unknown one is passed through with a warning. This
loader only reads configuration: mooncake-rs itself transfers over TCP only.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Optional

logger = logging.getLogger(__name__)

DEFAULT_GLOBAL_SEGMENT_SIZE = 3355443200  # 3.125 GiB
DEFAULT_LOCAL_BUFFER_SIZE = 1073741824  # 1 GiB

# Longest suffix first, so "mb" is not read as "b".
_MULTIPLIERS = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_MULTIPLIERS.update({"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40})
_MULTIPLIERS.update({"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "b": 1})

#: Protocols the Transfer Engine and the Store know (a hint: others only warn).
KNOWN_PROTOCOLS = frozenset(
    "tcp rdma efa nvmeof nvlink musa nvlink_intra hip barex cxl ascend ub ubshmem maca "
    "sunrise_link rpc_only".split()
)
_REQUIRED = ("local_hostname", "metadata_server", "master_server_address")


def _parse_segment_size(value: Any) -> int:
    """A size in bytes: an int as is, a string as a number with an optional suffix
    (``b``, ``k``/``kb``/``kib``, ``m``..., ``g``..., ``t``...; case-insensitive)."""
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return int(value)
    text = value.strip().lower()
    if not text:
        raise ValueError("Invalid segment size: empty string")
    for suffix, multiplier in _MULTIPLIERS.items():
        if text.endswith(suffix):
            number = text[: -len(suffix)].strip()
            if not number:
                raise ValueError(f"Invalid segment size: missing number before '{suffix}'")
            return int(float(number) * multiplier)
    return int(float(text))


def _parse_bool(value: Any) -> bool:
    """A boolean from a bool, a number, None (False) or a string such as ``"true"``,
    ``"no"``, ``"1"``; ``ValueError`` for other strings."""
    if isinstance(value, (bool, int, float)):
        return bool(value)
    if value is None:
        return False
    text = str(value).strip().lower()
    if text in ("", "false", "0", "no", "off", "disable"):
        return False
    if text in ("true", "1", "yes", "on", "enable"):
        return True
    raise ValueError(f"Invalid boolean value: {value!r}")


@dataclass
class MooncakeConfig:
    """Where a Mooncake client runs and what it contributes: ``local_hostname``,
    ``metadata_server``, ``global_segment_size`` and ``local_buffer_size`` (bytes),
    ``protocol``, ``device_name`` (RDMA device, optional), ``master_server_address``,
    ``enable_ssd_offload``, ``ssd_offload_path``, ``tenant_id``,
    ``enable_client_http_server``, ``client_http_port``."""

    local_hostname: str
    metadata_server: str
    global_segment_size: int
    local_buffer_size: int
    protocol: str
    device_name: Optional[str]
    master_server_address: str
    enable_ssd_offload: bool = False
    ssd_offload_path: str = ""
    tenant_id: str = "default"
    enable_client_http_server: bool = False
    client_http_port: int = 9300

    def __post_init__(self) -> None:
        if not isinstance(self.protocol, str) or not self.protocol.strip():
            raise ValueError(
                f"Invalid protocol: {self.protocol!r}. Protocol must be a non-empty string, e.g. 'tcp' or 'rdma'."
            )
        self.protocol = self.protocol.strip().lower()
        if self.protocol not in KNOWN_PROTOCOLS:
            logger.warning(
                "Unrecognised protocol %r; passing it through unchanged. Known protocols are: %s.",
                self.protocol,
                ", ".join(sorted(KNOWN_PROTOCOLS)),
            )
        for name in ("global_segment_size", "local_buffer_size"):
            if getattr(self, name) < 0:
                raise ValueError(f"Invalid {name}: {getattr(self, name)}. Size must be non-negative.")
        for name in _REQUIRED:
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"Config field {name!r} must be a non-empty string, got {value!r}.")

    @staticmethod
    def from_file(file_path: str) -> "MooncakeConfig":
        """Loads the config from a JSON file (see the module notes for its keys)."""
        with open(file_path) as f:
            doc = json.load(f)
        for name in _REQUIRED:
            if name not in doc:
                raise ValueError(f"Missing required config field: {name}")
        ssd_path, tenant = doc.get("ssd_offload_path"), doc.get("tenant_id")
        return MooncakeConfig(
            local_hostname=doc["local_hostname"],
            metadata_server=doc["metadata_server"],
            global_segment_size=_parse_segment_size(doc.get("global_segment_size", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_segment_size(doc.get("local_buffer_size", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=doc.get("protocol", "tcp"),
            device_name=doc.get("device_name", ""),
            master_server_address=doc["master_server_address"],
            enable_ssd_offload=_parse_bool(doc.get("enable_ssd_offload", False)),
            ssd_offload_path="" if ssd_path is None else str(ssd_path),
            tenant_id="default" if tenant is None else str(tenant),
            enable_client_http_server=_parse_bool(doc.get("enable_client_http_server", False)),
            client_http_port=int(doc.get("client_http_port", 9300)),
        )

    @staticmethod
    def load_from_env() -> "MooncakeConfig":
        """The file named by ``MOONCAKE_CONFIG_PATH``; without it, the variables
        ``MOONCAKE_MASTER`` (required), ``MOONCAKE_LOCAL_HOSTNAME`` (localhost),
        ``MOONCAKE_TE_META_DATA_SERVER`` (P2PHANDSHAKE), ``MOONCAKE_GLOBAL_SEGMENT_SIZE``,
        ``MOONCAKE_LOCAL_BUFFER_SIZE``, ``MOONCAKE_PROTOCOL`` (tcp), ``MOONCAKE_DEVICE``,
        ``MOONCAKE_OFFLOAD_ENABLED``, ``MOONCAKE_OFFLOAD_FILE_STORAGE_PATH``,
        ``MOONCAKE_TENANT_ID``, ``MOONCAKE_ENABLE_CLIENT_HTTP_SERVER``,
        ``MOONCAKE_CLIENT_HTTP_PORT``. ``ValueError`` when neither the file nor
        ``MOONCAKE_MASTER`` is given."""
        path = os.getenv("MOONCAKE_CONFIG_PATH")
        if path is not None:
            return MooncakeConfig.from_file(path)
        master = os.getenv("MOONCAKE_MASTER")
        if not master:
            raise ValueError("Neither the environment variable 'MOONCAKE_CONFIG_PATH' nor 'MOONCAKE_MASTER' is set.")
        env = os.getenv
        return MooncakeConfig(
            local_hostname=env("MOONCAKE_LOCAL_HOSTNAME", "localhost"),
            metadata_server=env("MOONCAKE_TE_META_DATA_SERVER", "P2PHANDSHAKE"),
            global_segment_size=_parse_segment_size(env("MOONCAKE_GLOBAL_SEGMENT_SIZE", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_segment_size(env("MOONCAKE_LOCAL_BUFFER_SIZE", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=env("MOONCAKE_PROTOCOL", "tcp"),
            device_name=env("MOONCAKE_DEVICE", ""),
            master_server_address=master,
            enable_ssd_offload=_parse_bool(env("MOONCAKE_OFFLOAD_ENABLED", "false")),
            ssd_offload_path=env("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", ""),
            tenant_id=env("MOONCAKE_TENANT_ID", "default"),
            enable_client_http_server=_parse_bool(env("MOONCAKE_ENABLE_CLIENT_HTTP_SERVER", "false")),
            client_http_port=int(env("MOONCAKE_CLIENT_HTTP_PORT", "9300")),
        )
