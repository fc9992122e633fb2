//! `mooncake_te_*`: Transfer Engine extensions that upstream's C API lacks (declared in
//! `mooncake_ext.h`), used by the Python package.
