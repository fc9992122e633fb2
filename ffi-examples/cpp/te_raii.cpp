// The Transfer Engine from C++ through the RAII wrapper in mooncake.hpp: two engines
// on loopback (P2PHANDSHAKE), a WRITE and a READ of 1 MiB, verified. Every handle is
// released by a destructor, also when an exception unwinds.
//
//   c++ -std=c++17 te_raii.cpp $(pkg-config --cflags --libs mooncake) -o te_raii
#include <cstdio>
#include <cstdint>
#include <exception>
#include <vector>

#include "mooncake.hpp"

int main() try {
    std::printf("libmooncake %s\n", mooncake_version());
    mooncake::Engine target("P2PHANDSHAKE"), initiator("P2PHANDSHAKE");

    const size_t len = 1 << 20;
    std::vector<unsigned char> remote(len), local(len), back(len);
    for (size_t i = 0; i < len; i++) local[i] = static_cast<unsigned char>(i ^ (i >> 8));
    mooncake::Registration r1(target, remote.data(), len);
    mooncake::Registration r2(initiator, local.data(), len);
    mooncake::Registration r3(initiator, back.data(), len);

    segment_id_t seg = initiator.open_segment(target.segment_name());
    const uint64_t addr = reinterpret_cast<uintptr_t>(remote.data());

    mooncake::Batch(initiator, 1).submit({mooncake::write(local.data(), seg, addr, len)}).wait();
    if (remote != local) throw std::runtime_error("WRITE: data differs");
    {
        mooncake::Batch batch(initiator, 2);  // two halves in one batch
        batch.submit({mooncake::read(back.data(), seg, addr, len / 2),
                      mooncake::read(back.data() + len / 2, seg, addr + len / 2, len / 2)});
        batch.wait();
    }
    if (back != local) throw std::runtime_error("READ: data differs");
    std::printf("te_raii: wrote and read back %zu bytes: verified\nte_raii: OK\n", len);
    return 0;
} catch (const std::exception &e) {
    std::fprintf(stderr, "te_raii: %s\n", e.what());
    return 1;
}
