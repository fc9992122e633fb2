//! GPU memory through the CUDA driver API, loaded at run time (`libcuda.so.1`, no
//! `NEEDED` entry): which device a pointer belongs to, copies between device and host
//! memory, PCI placement of the devices, and dma-buf handles for RDMA registration.
//!
//! Everything goes through the narrow [`Gpu`] trait: [`system`] is the driver when one
//! is installed and sees a device (else `None`, and the engine treats all memory as
//! host memory at no cost), and [`use_provider`] swaps in another implementation
//! (tests use [`fake`]).

pub mod fake;
mod gpu;
mod real;

pub use gpu::{Gpu, GpuError};

use std::sync::{Arc, OnceLock};

static PROVIDER: OnceLock<Option<Arc<dyn Gpu>>> = OnceLock::new();

/// The process's GPU runtime: the installed provider, else the CUDA driver when it
/// loads, initializes and has a device (`MC_CUDA_LIBRARY` names another library
/// file), else `None`.
pub fn system() -> Option<Arc<dyn Gpu>> {
    PROVIDER
        .get_or_init(|| match real::Cuda::load() {
            Ok(cuda) => {
                log::info!(
                    "gpu: {} with {} device(s)",
                    cuda.provider(),
                    cuda.device_count()
                );
                Some(Arc::new(cuda) as Arc<dyn Gpu>)
            }
            Err(why) => {
                log::debug!("gpu: no CUDA driver ({why}); all memory is host memory");
                None
            }
        })
        .clone()
}

/// Makes `gpu` the process's GPU runtime. Must come before anything asks
/// [`system`]; afterwards it is refused (the runtime in use is returned).
pub fn use_provider(gpu: Arc<dyn Gpu>) -> Result<(), Option<Arc<dyn Gpu>>> {
    PROVIDER.set(Some(gpu)).map_err(|_| system())
}

/// The device of `addr` when a GPU runtime is present; `None` otherwise.
pub fn device_of(addr: u64) -> Option<u32> {
    system().and_then(|g| g.device_of(addr))
}
