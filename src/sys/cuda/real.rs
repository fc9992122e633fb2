//! The CUDA driver API (`libcuda.so.1`) through `dlopen`: only the handful of entry
//! points [`super::gpu::Gpu`] needs, with the prototypes of `cuda.h` (CUresult is an int,
//! CUdevice an int, CUdeviceptr a 64-bit integer, CUcontext a pointer).

use super::gpu::{Gpu, GpuError};
use crate::sys::dl::Library;
use parking_lot::Mutex;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::os::fd::RawFd;

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;

const CUDA_SUCCESS: CuResult = 0;
const CU_POINTER_ATTRIBUTE_MEMORY_TYPE: c_int = 2;
const CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: c_int = 9;
const CU_MEMORYTYPE_DEVICE: c_uint = 2;
const CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: c_int = 1;

type InitFn = unsafe extern "C" fn(c_uint) -> CuResult;
type DriverGetVersionFn = unsafe extern "C" fn(*mut c_int) -> CuResult;
type DeviceGetCountFn = unsafe extern "C" fn(*mut c_int) -> CuResult;
type DeviceGetFn = unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult;
type DeviceGetPciBusIdFn = unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult;
type PrimaryCtxRetainFn = unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult;
type CtxSetCurrentFn = unsafe extern "C" fn(CuContext) -> CuResult;
type PointerGetAttributeFn = unsafe extern "C" fn(*mut c_void, c_int, u64) -> CuResult;
type MemcpyFn = unsafe extern "C" fn(u64, u64, usize) -> CuResult;
type MemAllocFn = unsafe extern "C" fn(*mut u64, usize) -> CuResult;
type MemFreeFn = unsafe extern "C" fn(u64) -> CuResult;
type GetHandleForAddressRangeFn =
    unsafe extern "C" fn(*mut c_void, u64, usize, c_int, u64) -> CuResult;

struct Functions {
    device_get: DeviceGetFn,
    device_get_pci_bus_id: DeviceGetPciBusIdFn,
    primary_ctx_retain: PrimaryCtxRetainFn,
    ctx_set_current: CtxSetCurrentFn,
    pointer_get_attribute: PointerGetAttributeFn,
    memcpy: MemcpyFn,
    mem_alloc: MemAllocFn,
    mem_free: MemFreeFn,
    get_handle_for_address_range: Option<GetHandleForAddressRangeFn>,
}

/// The loaded driver.
pub struct Cuda {
    _library: Library,
    f: Functions,
    version: c_int,
    count: u32,
    /// Each device's retained primary context (made current before a copy).
    contexts: Mutex<Vec<Option<usize>>>,
}

// SAFETY: the driver API is thread-safe; contexts are plain handles.
unsafe impl Send for Cuda {}
// SAFETY: as above.
unsafe impl Sync for Cuda {}

impl Cuda {
    /// Loads and initializes the driver; fails when it is absent, fails to
    /// initialize, or sees no device.
    pub fn load() -> Result<Cuda, GpuError> {
        let library = Library::open_configured("MC_CUDA_LIBRARY", &["libcuda.so.1", "libcuda.so"])?;
        macro_rules! resolve {
            ($name:literal) => {
                // SAFETY: the aliases above match cuda.h's prototypes.
                unsafe { library.function($name) }.ok_or_else(|| GpuError::MissingSymbol {
                    library: library.name().to_string(),
                    symbol: stringify!($name),
                })?
            };
        }
        let init: InitFn = resolve!(c"cuInit");
        let driver_version: DriverGetVersionFn = resolve!(c"cuDriverGetVersion");
        let device_count: DeviceGetCountFn = resolve!(c"cuDeviceGetCount");
        let f = Functions {
            device_get: resolve!(c"cuDeviceGet"),
            device_get_pci_bus_id: resolve!(c"cuDeviceGetPCIBusId"),
            primary_ctx_retain: resolve!(c"cuDevicePrimaryCtxRetain"),
            ctx_set_current: resolve!(c"cuCtxSetCurrent"),
            pointer_get_attribute: resolve!(c"cuPointerGetAttribute"),
            memcpy: resolve!(c"cuMemcpy"),
            mem_alloc: resolve!(c"cuMemAlloc_v2"),
            mem_free: resolve!(c"cuMemFree_v2"),
            // SAFETY: matches cuda.h (CUDA 11.7+); absent in older drivers.
            get_handle_for_address_range: unsafe {
                library.function(c"cuMemGetHandleForAddressRange")
            },
        };
        // SAFETY: plain calls with valid out-pointers.
        let rc = unsafe { init(0) };
        if rc != CUDA_SUCCESS {
            return Err(GpuError::Init { code: rc });
        }
        let (mut version, mut count) = (0, 0);
        // SAFETY: as above.
        unsafe {
            driver_version(&mut version);
            if device_count(&mut count) != CUDA_SUCCESS || count <= 0 {
                return Err(GpuError::NoDevice);
            }
        }
        Ok(Cuda {
            _library: library,
            f,
            version,
            count: count as u32,
            contexts: Mutex::new(vec![None; count as usize]),
        })
    }

    /// Makes `device`'s primary context current on this thread.
    fn enter(&self, device: u32) -> Result<(), GpuError> {
        let ctx = {
            let mut contexts = self.contexts.lock();
            let slot = contexts
                .get_mut(device as usize)
                .ok_or(GpuError::UnknownDevice { device })?;
            match slot {
                Some(c) => *c,
                None => {
                    let mut dev: CuDevice = 0;
                    let mut ctx: CuContext = std::ptr::null_mut();
                    // SAFETY: valid out-pointers; the ordinal was checked above.
                    let rc = unsafe {
                        match (self.f.device_get)(&mut dev, device as c_int) {
                            CUDA_SUCCESS => (self.f.primary_ctx_retain)(&mut ctx, dev),
                            e => e,
                        }
                    };
                    if rc != CUDA_SUCCESS {
                        return Err(GpuError::RetainContext { device, code: rc });
                    }
                    *slot = Some(ctx as usize);
                    ctx as usize
                }
            }
        };
        // SAFETY: a context retained above, never released.
        match unsafe { (self.f.ctx_set_current)(ctx as CuContext) } {
            CUDA_SUCCESS => Ok(()),
            code => Err(GpuError::Driver {
                call: "cuCtxSetCurrent",
                code,
            }),
        }
    }
}

impl Gpu for Cuda {
    fn provider(&self) -> String {
        format!("cuda {}", self.version)
    }

    fn device_count(&self) -> u32 {
        self.count
    }

    fn device_of(&self, addr: u64) -> Option<u32> {
        let mut kind: c_uint = 0;
        // SAFETY: the attribute is an unsigned int written to `kind`; any address may
        // be asked about (unknown ones return an error).
        let rc = unsafe {
            (self.f.pointer_get_attribute)(
                (&mut kind as *mut c_uint).cast(),
                CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                addr,
            )
        };
        if rc != CUDA_SUCCESS || kind != CU_MEMORYTYPE_DEVICE {
            return None;
        }
        let mut ordinal: c_int = -1;
        // SAFETY: the attribute is an int written to `ordinal`.
        let rc = unsafe {
            (self.f.pointer_get_attribute)(
                (&mut ordinal as *mut c_int).cast(),
                CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                addr,
            )
        };
        (rc == CUDA_SUCCESS && ordinal >= 0).then_some(ordinal as u32)
    }

    fn pci_bus_id(&self, device: u32) -> Option<String> {
        let mut dev: CuDevice = 0;
        let mut buf = [0 as c_char; 64];
        // SAFETY: valid out-pointers; `buf` holds 64 bytes.
        let ok = unsafe {
            (self.f.device_get)(&mut dev, device as c_int) == CUDA_SUCCESS
                && (self.f.device_get_pci_bus_id)(buf.as_mut_ptr(), buf.len() as c_int, dev)
                    == CUDA_SUCCESS
        };
        ok.then(|| {
            // SAFETY: the driver wrote a NUL-terminated string into `buf`.
            unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .to_ascii_lowercase()
        })
    }

    fn copy(&self, dst: u64, src: u64, len: u64) -> Result<(), GpuError> {
        let device = self
            .device_of(dst)
            .or_else(|| self.device_of(src))
            .unwrap_or(0);
        self.enter(device)?;
        // SAFETY: with unified addressing cuMemcpy copies between any two valid ranges;
        // the caller guarantees both are valid for `len` bytes.
        match unsafe { (self.f.memcpy)(dst, src, len as usize) } {
            CUDA_SUCCESS => Ok(()),
            code => Err(GpuError::DriverSized {
                call: "cuMemcpy",
                len,
                code,
            }),
        }
    }

    fn dmabuf_fd(&self, addr: u64, len: u64) -> Result<RawFd, GpuError> {
        let get = self
            .f
            .get_handle_for_address_range
            .ok_or(GpuError::NoDmaBuf)?;
        let device = self.device_of(addr).ok_or(GpuError::NotDeviceMemory)?;
        self.enter(device)?;
        let mut fd: c_int = -1;
        // SAFETY: the handle for DMA_BUF_FD is an int written to `fd`.
        match unsafe {
            get(
                (&mut fd as *mut c_int).cast(),
                addr,
                len as usize,
                CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                0,
            )
        } {
            CUDA_SUCCESS if fd >= 0 => Ok(fd),
            code => Err(GpuError::Driver {
                call: "cuMemGetHandleForAddressRange",
                code,
            }),
        }
    }

    fn alloc(&self, device: u32, len: u64) -> Result<u64, GpuError> {
        self.enter(device)?;
        let mut p: u64 = 0;
        // SAFETY: a valid out-pointer; the context is current.
        match unsafe { (self.f.mem_alloc)(&mut p, len as usize) } {
            CUDA_SUCCESS => Ok(p),
            code => Err(GpuError::DriverSized {
                call: "cuMemAlloc",
                len,
                code,
            }),
        }
    }

    fn free(&self, addr: u64) {
        if let Some(device) = self.device_of(addr) {
            if self.enter(device).is_ok() {
                // SAFETY: memory from `alloc`, freed once by the caller's contract.
                unsafe { (self.f.mem_free)(addr) };
            }
        }
    }
}
