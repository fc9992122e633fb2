"""A peer for test_rpc_interface.py, run with either implementation's Python.

``server``: an RpcInterface server on 127.0.0.1 (a free port, printed as
``PORT <n>``); every payload received is printed as ``GOT <kind> <len> <sha256>``
(kind ``data`` or ``tensor:<dtype>:<shape>``); it exits when stdin closes.
``client <host:port>``: sends the cases of ``cases()`` and prints ``RC <rc>`` each.
"""

from __future__ import annotations

import ctypes
import hashlib
import socket
import sys


def cases():
    """(kind, payload) sent by a client, in an order upstream's server reads
    correctly (it hands an attachment-less call after an attached one the old
    attachment)."""
    header = (2).to_bytes(4, "little") + (2).to_bytes(4, "little")
    header += (2).to_bytes(8, "little", signed=True) + (3).to_bytes(8, "little", signed=True) + bytes(16)
    return [
        ("data", b"hello"),
        ("data", bytes(range(256)) * 4),
        ("data", header + bytes(range(24))),
        ("data", bytes(range(251)) * 9),
        ("tensor", bytes(24)),
    ]


class FakeTensor:
    """What send_tensor reads of a torch tensor, over ctypes memory."""

    def __init__(self, payload: bytes) -> None:
        self._buf = ctypes.create_string_buffer(payload, len(payload))
        self.shape = (len(payload) // 4,)
        self.dtype = "torch.float32"

    def data_ptr(self) -> int:
        return ctypes.addressof(self._buf)

    def numel(self) -> int:
        return len(self._buf.raw) // 4

    def element_size(self) -> int:
        return 4


def digest(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()[:16]


def main() -> None:
    from mooncake.engine import RpcInterface

    rpc = RpcInterface()
    if sys.argv[1] == "server":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()

        def on_data(d):
            print(f"GOT data {len(d['data'])} {digest(d['data'])}", flush=True)

        def on_tensor(t):
            data = t.get_data_as_bytes()
            print(f"GOT tensor:{t.dtype} {len(data)} {digest(data)}", flush=True)

        rpc.initialize_server(f"127.0.0.1:{port}")
        rpc.set_data_receive_callback(on_data)
        rpc.set_tensor_receive_callback(on_tensor)
        assert rpc.start_server_async()
        print(f"PORT {port}", flush=True)
        sys.stdin.read()
        rpc.stop_server()
        return
    target = sys.argv[2]
    rpc.initialize_client()
    for kind, payload in cases():
        if kind == "data":
            rc = rpc.send_data(target, payload)
        else:
            rc = rpc.send_tensor(target, FakeTensor(payload))
        print(f"RC {rc}", flush=True)


if __name__ == "__main__":
    main()
