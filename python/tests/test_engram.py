"""``EngramStore`` (upstream's ``scripts/test_engram_store.py`` scenarios): an Engram
layer's tables written once and gathered row by row, on a live store. Runs with
either implementation (``MOONCAKE_PY_IMPL``); needs numpy (installed with torch in
the Python stage), skipped with the reason where it is missing."""

from __future__ import annotations

import pytest

from mooncake.store import EngramStore, EngramStoreConfig

np = pytest.importorskip("numpy", reason="numpy is not installed (it comes with the torch site)")

SIZES = [17, 19, 23, 29]
DIM = 8


def config(sizes=SIZES, dim=DIM) -> EngramStoreConfig:
    c = EngramStoreConfig()
    c.table_vocab_sizes = list(sizes)
    c.embedding_dim = dim
    return c


def tables(seed: int):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, DIM)).astype(np.float32) for n in SIZES]


def test_config_and_metadata() -> None:
    c = EngramStoreConfig()
    assert (c.table_vocab_sizes, c.embedding_dim) == ([1024], 64)
    e = EngramStore(-3, config())
    assert e.get_store_keys() == [f"engram:l-3:h{h}" for h in range(4)]
    assert (e.get_num_heads(), e.get_embedding_dim(), e.get_table_vocab_sizes()) == (4, DIM, SIZES)
    for bad, msg in [
        (config(sizes=[]), "must not be empty"),
        (config(dim=0), "must be positive"),
        (config(sizes=[3, 0]), "only positive values"),
    ]:
        with pytest.raises(ValueError, match=msg):
            EngramStore(0, bad)
    with pytest.raises(RuntimeError):
        EngramStore(0, config(), store=object())
    with pytest.raises(RuntimeError):
        e.lookup([[[0, 0, 0, 0]]])


def test_populate_lookup_remove(store) -> None:
    layer = 7000 + (id(store) % 1000)
    e = EngramStore(layer, config(), store)
    ts = tables(1)
    e.populate(ts)
    with pytest.raises(RuntimeError, match="populate failed"):
        e.populate(ts)  # create-only
    ids = np.array([[[0, 1, 2, 3], [16, 18, 22, 28]], [[5, 5, 5, 5], [1, 0, 3, 2]]], dtype=np.int64)
    want = np.stack([np.stack([ts[h][ids[b, l, h]] for h in range(4)]) for b in range(2) for l in range(2)])
    got = e.lookup(ids)
    assert got.dtype == np.float32 and got.shape == (2, 2, 4, DIM)
    assert np.array_equal(got.reshape(4, 4, DIM), want)
    assert np.array_equal(e.lookup(ids.tolist()), got)
    assert np.array_equal(e.lookup(ids.astype(np.int32)), got)
    for bad, msg in [
        (np.zeros((1, 1, 3), dtype=np.int64), "last dimension"),
        (np.zeros((1, 4), dtype=np.int64), "shape"),
        ([], "must not be empty"),
        (np.array([[[0, 0, 0, 29]]]), "lookup failed"),
        (np.array([[[-1, 0, 0, 0]]]), "lookup failed"),
    ]:
        with pytest.raises(RuntimeError, match=msg):
            e.lookup(bad)
    with pytest.raises(RuntimeError, match="does not match"):
        EngramStore(layer + 1, config(), store).populate([t[:-1] for t in ts])
    assert e.remove_from_store(force=True) == 4
    assert e.remove_from_store(force=True) == 0
    with pytest.raises(RuntimeError, match="lookup failed"):
        e.lookup(ids)
