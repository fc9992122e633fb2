"""Tenants (``setup(..., tenant_id=...)``): every object call names the client's
tenant, so on a master with ``--enable_multi_tenants`` one tenant's keys are
invisible to another's and a tenant without a quota policy cannot write. Runs with
either implementation (``MOONCAKE_PY_IMPL``) against upstream's master (this project's
master refuses multi-tenancy until it has tenant quotas; see README).
"""

from __future__ import annotations

from typing import Iterator

import pytest

from mooncake.store import MooncakeDistributedStore
from store_env import LOCAL_BUFFER, SEGMENT, Master, upstream_master_binary

NOT_FOUND = -704
NOT_REGISTERED = -1701


@pytest.fixture(scope="module")
def tenant_master(tmp_path_factory) -> Iterator[Master]:
    policy = tmp_path_factory.mktemp("tenants") / "quota.yaml"
    policy.write_text(
        "version: 1\ntenants:\n  - name: tenant-a\n    quota: 64MB\n  - name: tenant-b\n    quota: 64MB\n"
    )
    m = Master(
        extra=[
            "--enable_multi_tenants=true",
            "--tenant_quota_connector_type=file",
            f"--tenant_quota_connector_uri={policy}",
        ],
        binary=upstream_master_binary(),
    )
    yield m
    m.stop()


def _store(master: Master, tenant: str, dict_form: bool = False) -> MooncakeDistributedStore:
    s = MooncakeDistributedStore()
    if dict_form:
        rc = s.setup(
            {
                "local_hostname": "127.0.0.1",
                "metadata_server": master.metadata,
                "global_segment_size": str(SEGMENT),
                "local_buffer_size": str(LOCAL_BUFFER),
                "protocol": "tcp",
                "master_server_addr": master.addr,
                "tenant_id": tenant,
            }
        )
    else:
        rc = s.setup("127.0.0.1", master.metadata, SEGMENT, LOCAL_BUFFER, "tcp", "", master.addr, tenant_id=tenant)
    assert rc == 0, f"setup as {tenant!r}: {rc}"
    return s


@pytest.fixture(scope="module")
def tenants(tenant_master):
    a, b = _store(tenant_master, "tenant-a"), _store(tenant_master, "tenant-b", dict_form=True)
    yield a, b
    a.close()
    b.close()


def test_a_tenants_keys_are_invisible_to_another(tenants, k):
    a, b = tenants
    assert a.put(k("x"), b"from-a") == 0
    assert b.is_exist(k("x")) == 0
    assert b.batch_is_exist([k("x")]) == [0]
    assert b.get(k("x")) == b""
    assert b.get_size(k("x")) == NOT_FOUND
    assert b.get_replica_desc(k("x")) == []
    assert b.remove(k("x")) == NOT_FOUND
    assert a.get(k("x")) == b"from-a"


def test_the_same_key_in_two_tenants_is_two_objects(tenants, k):
    a, b = tenants
    assert a.put(k("y"), b"from-a") == 0
    assert b.put(k("y"), b"from-b") == 0
    assert (a.get(k("y")), b.get(k("y"))) == (b"from-a", b"from-b")
    assert b.remove_by_regex(f"^{k('')}", force=True) == 1
    assert a.get(k("y")) == b"from-a"


def test_a_tenant_without_a_policy_cannot_write(tenant_master, k):
    c = _store(tenant_master, "tenant-c")
    try:
        assert c.put(k("z"), b"data") == NOT_REGISTERED
        assert c.is_exist(k("z")) == 0
    finally:
        c.close()
