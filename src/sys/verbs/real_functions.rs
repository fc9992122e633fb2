//! The exported libibverbs functions [`super::real`] calls, as typed function
//! pointers resolved from the loaded library.

use super::abi::*;
use super::error::LoadError;
use crate::sys::dl::Library;
use std::ffi::{c_char, c_int, c_uint, c_void};

pub(super) type GetDeviceList = unsafe extern "C" fn(*mut c_int) -> *mut *mut c_void;
pub(super) type FreeDeviceList = unsafe extern "C" fn(*mut *mut c_void);
pub(super) type GetDeviceName = unsafe extern "C" fn(*mut c_void) -> *const c_char;
pub(super) type OpenDevice = unsafe extern "C" fn(*mut c_void) -> *mut ibv_context;
pub(super) type CloseDevice = unsafe extern "C" fn(*mut ibv_context) -> c_int;
pub(super) type QueryDevice = unsafe extern "C" fn(*mut ibv_context, *mut ibv_device_attr) -> c_int;
pub(super) type QueryPort = unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr) -> c_int;
pub(super) type QueryGid = unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut ibv_gid) -> c_int;
pub(super) type AllocPd = unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd;
pub(super) type DeallocPd = unsafe extern "C" fn(*mut ibv_pd) -> c_int;
pub(super) type RegMr = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, c_int) -> *mut ibv_mr;
pub(super) type RegMrIova2 =
    unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, u64, c_uint) -> *mut ibv_mr;
pub(super) type RegDmabufMr =
    unsafe extern "C" fn(*mut ibv_pd, u64, usize, u64, c_int, c_int) -> *mut ibv_mr;
pub(super) type DeregMr = unsafe extern "C" fn(*mut ibv_mr) -> c_int;
pub(super) type CreateCompChannel = unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_comp_channel;
pub(super) type DestroyCompChannel = unsafe extern "C" fn(*mut ibv_comp_channel) -> c_int;
pub(super) type CreateCq = unsafe extern "C" fn(
    *mut ibv_context,
    c_int,
    *mut c_void,
    *mut ibv_comp_channel,
    c_int,
) -> *mut ibv_cq;
pub(super) type DestroyCq = unsafe extern "C" fn(*mut ibv_cq) -> c_int;
pub(super) type GetCqEvent =
    unsafe extern "C" fn(*mut ibv_comp_channel, *mut *mut ibv_cq, *mut *mut c_void) -> c_int;
pub(super) type AckCqEvents = unsafe extern "C" fn(*mut ibv_cq, c_uint);
pub(super) type CreateQp = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp;
pub(super) type ModifyQp = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int;
pub(super) type DestroyQp = unsafe extern "C" fn(*mut ibv_qp) -> c_int;

/// The exported functions used, resolved once.
pub(super) struct Functions {
    pub(super) get_device_list: GetDeviceList,
    pub(super) free_device_list: FreeDeviceList,
    pub(super) get_device_name: GetDeviceName,
    pub(super) open_device: OpenDevice,
    pub(super) close_device: CloseDevice,
    pub(super) query_device: QueryDevice,
    pub(super) query_port: QueryPort,
    pub(super) query_gid: QueryGid,
    pub(super) alloc_pd: AllocPd,
    pub(super) dealloc_pd: DeallocPd,
    pub(super) reg_mr: RegMr,
    pub(super) reg_mr_iova2: Option<RegMrIova2>,
    pub(super) reg_dmabuf_mr: Option<RegDmabufMr>,
    pub(super) dereg_mr: DeregMr,
    pub(super) create_comp_channel: CreateCompChannel,
    pub(super) destroy_comp_channel: DestroyCompChannel,
    pub(super) create_cq: CreateCq,
    pub(super) destroy_cq: DestroyCq,
    pub(super) get_cq_event: GetCqEvent,
    pub(super) ack_cq_events: AckCqEvents,
    pub(super) create_qp: CreateQp,
    pub(super) modify_qp: ModifyQp,
    pub(super) destroy_qp: DestroyQp,
}

impl Functions {
    /// Resolves every function from `library`; says which is missing otherwise
    /// (`ibv_reg_mr_iova2` and `ibv_reg_dmabuf_mr` are optional).
    pub(super) fn resolve(library: &Library) -> Result<Functions, LoadError> {
        macro_rules! resolve {
            ($name:literal) => {
                // SAFETY: the type aliases above match rdma-core's prototypes.
                unsafe { library.function($name) }.ok_or_else(|| LoadError::MissingFunction {
                    library: library.name().to_string(),
                    function: $name.to_string_lossy().into_owned(),
                })?
            };
        }
        Ok(Functions {
            get_device_list: resolve!(c"ibv_get_device_list"),
            free_device_list: resolve!(c"ibv_free_device_list"),
            get_device_name: resolve!(c"ibv_get_device_name"),
            open_device: resolve!(c"ibv_open_device"),
            close_device: resolve!(c"ibv_close_device"),
            query_device: resolve!(c"ibv_query_device"),
            query_port: resolve!(c"ibv_query_port"),
            query_gid: resolve!(c"ibv_query_gid"),
            alloc_pd: resolve!(c"ibv_alloc_pd"),
            dealloc_pd: resolve!(c"ibv_dealloc_pd"),
            reg_mr: resolve!(c"ibv_reg_mr"),
            // SAFETY: matches rdma-core's prototype.
            reg_mr_iova2: unsafe { library.function(c"ibv_reg_mr_iova2") },
            // SAFETY: matches rdma-core's prototype (rdma-core 34+; absent before).
            reg_dmabuf_mr: unsafe { library.function(c"ibv_reg_dmabuf_mr") },
            dereg_mr: resolve!(c"ibv_dereg_mr"),
            create_comp_channel: resolve!(c"ibv_create_comp_channel"),
            destroy_comp_channel: resolve!(c"ibv_destroy_comp_channel"),
            create_cq: resolve!(c"ibv_create_cq"),
            destroy_cq: resolve!(c"ibv_destroy_cq"),
            get_cq_event: resolve!(c"ibv_get_cq_event"),
            ack_cq_events: resolve!(c"ibv_ack_cq_events"),
            create_qp: resolve!(c"ibv_create_qp"),
            modify_qp: resolve!(c"ibv_modify_qp"),
            destroy_qp: resolve!(c"ibv_destroy_qp"),
        })
    }
}
