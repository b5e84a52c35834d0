//! relu as a TVM-FFI library written in Rust: `relu_cpu(out, x)` writes `max(x, 0)` of the
//! CPU tensor `x` into `out` (NaN stays NaN, as in `torch.relu`). The tensors come through
//! DLPack as `TensorView`s, without a copy; a bad call raises a Python `ValueError` or
//! `TypeError` through tvm-ffi.

use tvm_ffi::tvm_ffi_sys::dlpack::{DLDataTypeCode, DLDeviceType};
use tvm_ffi::{ensure, tvm_ffi_dll_export_typed_func, Result, TensorView, TYPE_ERROR, VALUE_ERROR};

/// The element types `relu_cpu` takes.
enum Kind {
    F32,
    F64,
}

/// Check that `out` and `x` are contiguous CPU tensors of one shape and of float32 or
/// float64; returns the element type.
fn check(out: &TensorView, x: &TensorView) -> Result<Kind> {
    ensure!(
        x.device().device_type == DLDeviceType::kDLCPU && out.device().device_type == DLDeviceType::kDLCPU,
        VALUE_ERROR,
        "relu_cpu takes CPU tensors"
    );
    ensure!(
        out.shape() == x.shape(),
        VALUE_ERROR,
        "out has shape {:?}, x has shape {:?}",
        out.shape(),
        x.shape()
    );
    ensure!(x.is_contiguous() && out.is_contiguous(), VALUE_ERROR, "out and x must be contiguous");
    let (t, o) = (x.dtype(), out.dtype());
    ensure!(
        t.code == o.code && t.bits == o.bits && t.lanes == o.lanes,
        TYPE_ERROR,
        "out and x must have the same dtype"
    );
    ensure!(
        t.code == DLDataTypeCode::kDLFloat as u8 && t.lanes == 1 && (t.bits == 32 || t.bits == 64),
        TYPE_ERROR,
        "relu takes float32 or float64 tensors"
    );
    Ok(if t.bits == 32 { Kind::F32 } else { Kind::F64 })
}

/// `out[i] = max(x[i], 0)` for `n` elements. Raw pointers, not slices: `out` may be `x` (in
/// place), and a shared and a mutable slice of the same memory may not exist at once.
///
/// # Safety
/// `out` and `x` point to `n` valid elements each.
unsafe fn relu<T: Copy + PartialOrd + Default>(out: *mut T, x: *const T, n: usize) {
    for i in 0..n {
        let v = x.add(i).read();
        out.add(i).write(if v < T::default() { T::default() } else { v });
    }
}

fn relu_cpu(out: TensorView, x: TensorView) -> Result<()> {
    let n = x.numel();
    let kind = check(&out, &x)?;
    // SAFETY: both views are contiguous CPU tensors of `n` elements of the checked type.
    unsafe {
        match kind {
            Kind::F32 => relu(out.data_ptr() as *mut f32, x.data_ptr() as *const f32, n),
            Kind::F64 => relu(out.data_ptr() as *mut f64, x.data_ptr() as *const f64, n),
        }
    }
    Ok(())
}

tvm_ffi_dll_export_typed_func!(relu_cpu, relu_cpu);
