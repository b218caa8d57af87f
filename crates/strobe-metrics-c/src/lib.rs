//! `libstrobe_metrics.so`: exports the C ABI of `include/strobe_metrics.h`,
//! implemented in [`strobe_metrics::capi`].
//!
//! Owns the exported symbols only (`strobe_metrics::export_c_abi!`): each
//! forwards to the function of the same name in `strobe_metrics::capi`,
//! which checks its arguments and catches panics. Must never hold state or logic of its
//! own (a second copy of the registries would split tools from the
//! runtime), and never export anything the header does not declare.

strobe_metrics::export_c_abi!();
