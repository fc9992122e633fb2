"""Tenants (``setup(..., tenant_id=...)``): every object call names the client's
tenant, so on a master with ``--enable_multi_tenants`` one tenant's keys are
invisible to another's, a tenant without a quota policy cannot write, and a tenant's
memory replicas stay within its quota (its own older objects are evicted to make
room; beyond that, -1700). Runs with either implementation (``MOONCAKE_PY_IMPL``)
against this project's master and upstream's, including the quota API on the admin
port and the tenant metrics.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Iterator, Tuple

import pytest

from mooncake.store import MooncakeDistributedStore
from store_env import LOCAL_BUFFER, SEGMENT, Master, upstream_master_binary

NOT_FOUND = -704
QUOTA_EXCEEDED = -1700
NOT_REGISTERED = -1701
MB = 1 << 20


@pytest.fixture(scope="module", params=["ours", "upstream"])
def tenant_master(request, tmp_path_factory) -> Iterator[Master]:
    binary = upstream_master_binary() if request.param == "upstream" else None
    policy = tmp_path_factory.mktemp("tenants") / "quota.yaml"
    policy.write_text(
        "version: 1\ntenants:\n  - name: tenant-a\n    quota: 64MB\n  - name: tenant-b\n    quota: 64MB\n"
        "  - name: tenant-small\n    quota: 1MB\n"
    )
    extra = [
        "--enable_multi_tenants=true",
        "--tenant_quota_connector_type=file",
        f"--tenant_quota_connector_uri={policy}",
    ]
    m = Master(extra=extra, binary=binary) if binary else Master(extra=extra)
    yield m
    m.stop()


def _admin(master: Master, method: str, path: str, body: object = None) -> Tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{master.metrics_port}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _metrics(master: Master) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{master.metrics_port}/metrics", timeout=10) as r:
        return r.read().decode()


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


def test_a_tenant_stays_within_its_quota(tenant_master, k):
    small = _store(tenant_master, "tenant-small")
    try:
        assert small.put(k("big"), b"x" * (2 * MB)) == QUOTA_EXCEEDED
        assert small.is_exist(k("big")) == 0
        first = b"1" * (600 << 10)
        assert small.put(k("first"), first) == 0
        # No room for a second: the tenant's own unleased object is evicted for it.
        assert small.put(k("second"), b"2" * (600 << 10)) == 0
        assert small.is_exist(k("first")) == 0
        assert small.get(k("second")) == b"2" * (600 << 10)
        text = _metrics(tenant_master)
        assert 'mooncake_tenant_quota_reject_total{tenant_id="tenant-small",reason="quota_exceeded"} 1' in text
        assert 'mooncake_tenant_evict_bytes_total{tenant_id="tenant-small"}' in text
        assert f'mooncake_tenant_quota_charged_bytes{{tenant_id="tenant-small"}} {600 << 10}' in text
        assert 'mooncake_tenant_quota_requested_bytes{tenant_id="tenant-small"} 1048576' in text
    finally:
        small.close()


def test_the_quota_api_manages_policies(tenant_master, k):
    status, body = _admin(tenant_master, "GET", "/api/v1/tenant_quotas?tenant_id=tenant-small")
    assert status == 200 and body["success"]
    assert list(body["data"]) == [
        "tenant_id",
        "requested_quota_bytes",
        "effective_quota_bytes",
        "charged_bytes",
        "admission_closed",
        "over_quota",
        "has_explicit_policy",
    ]
    assert body["data"]["requested_quota_bytes"] == MB and body["data"]["has_explicit_policy"] is True
    assert _admin(tenant_master, "GET", "/api/v1/tenant_quotas?tenant_id=_x")[0] == 400
    assert _admin(tenant_master, "GET", "/api/v1/tenant_quotas?tenant_id=nobody")[1]["error_code"] == NOT_FOUND
    status, body = _admin(tenant_master, "PUT", "/api/v1/tenant_quotas?tenant_id=tenant-d", {"requested_quota_bytes": 0})
    assert (status, body["error_code"]) == (400, -600)
    status, body = _admin(tenant_master, "PUT", "/api/v1/tenant_quotas?tenant_id=tenant-d", {"requested_quota_bytes": MB})
    assert status == 200 and body["data"]["tenant_id"] == "tenant-d" and not body["data"]["admission_closed"]
    d = _store(tenant_master, "tenant-d")
    try:
        assert d.put(k("d"), b"data") == 0
        status, body = _admin(tenant_master, "DELETE", "/api/v1/tenant_quotas?tenant_id=tenant-d")
        assert (status, body["error_code"]) == (409, -1702)
        assert d.remove(k("d"), True) == 0
        status, body = _admin(tenant_master, "DELETE", "/api/v1/tenant_quotas?tenant_id=tenant-d")
        assert (status, body) == (200, {"success": True, "data": None})
        assert d.put(k("d2"), b"data") == NOT_REGISTERED
    finally:
        d.close()
    status, body = _admin(tenant_master, "GET", "/api/v1/tenant_quotas")
    names = [t["tenant_id"] for t in body["data"]]
    assert status == 200 and names == sorted(names) and "tenant-a" in names and "tenant-d" not in names
