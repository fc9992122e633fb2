//! `mooncake_store_*` extensions that upstream's `store_c.h` lacks (declared in
//! `mooncake_ext.h`), used by the Python package.
