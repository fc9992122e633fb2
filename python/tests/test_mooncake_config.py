"""``mooncake.mooncake_config`` (upstream's config loader) for both implementations:
JSON files, the environment, size and boolean spellings, validation errors."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from conftest import IMPL
from mooncake.mooncake_config import DEFAULT_GLOBAL_SEGMENT_SIZE, DEFAULT_LOCAL_BUFFER_SIZE, MooncakeConfig

GIB = 1 << 30
REQUIRED = {"local_hostname": "node1", "metadata_server": "P2PHANDSHAKE", "master_server_address": "m:50051"}


def write(tmp_path: Path, doc: dict) -> str:
    path = tmp_path / "mooncake.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_from_file_defaults(tmp_path: Path) -> None:
    c = MooncakeConfig.from_file(write(tmp_path, REQUIRED))
    assert (c.local_hostname, c.metadata_server, c.master_server_address) == ("node1", "P2PHANDSHAKE", "m:50051")
    assert c.global_segment_size == DEFAULT_GLOBAL_SEGMENT_SIZE == 3355443200
    assert c.local_buffer_size == DEFAULT_LOCAL_BUFFER_SIZE == GIB
    assert (c.protocol, c.device_name, c.enable_ssd_offload, c.ssd_offload_path) == ("tcp", "", False, "")
    assert (c.tenant_id, c.enable_client_http_server, c.client_http_port) == ("default", False, 9300)


def test_from_file_all_keys(tmp_path: Path) -> None:
    doc = dict(REQUIRED, global_segment_size="4GB", local_buffer_size="512 mb", protocol="RDMA",
               device_name="mlx5_0", enable_ssd_offload="yes", ssd_offload_path="/nvme", tenant_id=7,
               enable_client_http_server="off", client_http_port="9400")
    c = MooncakeConfig.from_file(write(tmp_path, doc))
    assert c.global_segment_size == 4 * GIB and c.local_buffer_size == 512 << 20
    assert c.protocol == "rdma" and c.device_name == "mlx5_0"
    assert c.enable_ssd_offload is True and c.ssd_offload_path == "/nvme" and c.tenant_id == "7"
    assert c.enable_client_http_server is False and c.client_http_port == 9400


@pytest.mark.parametrize(
    "value, size",
    [(1234, 1234), ("1234", 1234), ("1.5g", 3 * GIB // 2), ("16M", 16 << 20), ("2 TB", 2 << 40), ("10b", 10),
     ("  3kb ", 3072)],
)
def test_size_spellings(tmp_path: Path, value: object, size: int) -> None:
    assert MooncakeConfig.from_file(write(tmp_path, dict(REQUIRED, local_buffer_size=value))).local_buffer_size == size


@pytest.mark.skipif(IMPL != "ours", reason="an extension (ours only)")
def test_iec_size_spellings(tmp_path: Path) -> None:
    assert MooncakeConfig.from_file(write(tmp_path, dict(REQUIRED, global_segment_size="16MiB"))).global_segment_size == 16 << 20


@pytest.mark.parametrize(
    "doc",
    [
        {"local_hostname": "a", "metadata_server": "b"},
        dict(REQUIRED, local_hostname=""),
        dict(REQUIRED, protocol=""),
        dict(REQUIRED, global_segment_size=-1),
        dict(REQUIRED, global_segment_size="lots"),
        dict(REQUIRED, local_buffer_size="MB"),
        dict(REQUIRED, enable_ssd_offload="maybe"),
    ],
)
def test_from_file_errors(tmp_path: Path, doc: dict) -> None:
    with pytest.raises(ValueError):
        MooncakeConfig.from_file(write(tmp_path, doc))


def test_unknown_protocol_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        c = MooncakeConfig.from_file(write(tmp_path, dict(REQUIRED, protocol="Carrier-Pigeon")))
    assert c.protocol == "carrier-pigeon" and "carrier-pigeon" in caplog.text


def test_load_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MOONCAKE_CONFIG_PATH", "MOONCAKE_MASTER", "MOONCAKE_LOCAL_HOSTNAME", "MOONCAKE_PROTOCOL",
                 "MOONCAKE_GLOBAL_SEGMENT_SIZE", "MOONCAKE_TE_META_DATA_SERVER", "MOONCAKE_OFFLOAD_ENABLED"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError):
        MooncakeConfig.load_from_env()
    monkeypatch.setenv("MOONCAKE_MASTER", "10.0.0.1:50051")
    monkeypatch.setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", "8gb")
    monkeypatch.setenv("MOONCAKE_OFFLOAD_ENABLED", "TRUE")
    c = MooncakeConfig.load_from_env()
    assert (c.master_server_address, c.local_hostname, c.metadata_server) == ("10.0.0.1:50051", "localhost", "P2PHANDSHAKE")
    assert c.global_segment_size == 8 * GIB and c.local_buffer_size == GIB and c.enable_ssd_offload is True
    monkeypatch.setenv("MOONCAKE_CONFIG_PATH", write(tmp_path, dict(REQUIRED, local_buffer_size="1mb")))
    c = MooncakeConfig.load_from_env()
    assert c.master_server_address == "m:50051" and c.local_buffer_size == 1 << 20
