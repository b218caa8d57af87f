//! Operation filters: which operations of a kind a tracing service
//! accepts (seed 001: none given means all).
//!
//! Owns the filter's bit set, built when a service is configured and
//! tested on every emission; testing never allocates or locks.

use crate::error::{Error, Result};
use crate::kind::Kind;

/// Which operations of a kind a service accepts.
pub(crate) struct OperationFilter {
    bits: Option<Box<[u64]>>,
}

impl OperationFilter {
    /// `None` or an empty list accepts every operation (seed 001: null and
    /// 0 trace all operations).
    pub(crate) fn new(kind: Kind, operations: Option<&[u32]>) -> Result<OperationFilter> {
        let Some(ops) = operations.filter(|o| !o.is_empty()) else {
            return Ok(OperationFilter { bits: None });
        };
        let count = kind.operation_count();
        let mut bits = vec![0u64; (count as usize).div_ceil(64)].into_boxed_slice();
        for &op in ops {
            if op >= count {
                return Err(Error::UnknownOperation {
                    kind: kind.name(),
                    operation: op,
                    count,
                });
            }
            bits[op as usize / 64] |= 1 << (op % 64);
        }
        Ok(OperationFilter { bits: Some(bits) })
    }

    /// Whether `operation` passes. Never allocates or locks.
    #[inline]
    pub(crate) fn allows(&self, operation: u32) -> bool {
        match &self.bits {
            None => true,
            Some(bits) => bits
                .get(operation as usize / 64)
                .is_some_and(|w| w & (1 << (operation % 64)) != 0),
        }
    }
}
