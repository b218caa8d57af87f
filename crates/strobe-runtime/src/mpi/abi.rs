//! Which MPI the process runs and what its handles and statuses look like.
//!
//! Owns telling the two binary interfaces of MPI on Linux apart (Open
//! MPI's, where handles are pointers to library objects, and MPICH's,
//! shared by Intel MPI and MVAPICH, where handles are 32-bit integers),
//! their constants (`MPI_COMM_WORLD`, `MPI_BYTE`, `MPI_STATUS_IGNORE`, …)
//! and reading an `MPI_Status`. It never calls MPI and never writes to the
//! program's memory.

use std::ffi::CStr;
use std::sync::OnceLock;

/// An MPI handle as it travels in a register: a pointer (Open MPI) or a
/// 32-bit integer whose upper register half is undefined (MPICH).
pub type Handle = usize;

/// The constants of one MPI binary interface.
#[derive(Debug)]
pub struct Abi {
    /// Open MPI (pointer handles); MPICH's interface otherwise.
    pub open_mpi: bool,
    pub comm_world: Handle,
    pub comm_self: Handle,
    pub comm_null: Handle,
    pub byte: Handle,
    /// `MPI_STATUS_IGNORE` (and `MPI_STATUSES_IGNORE`, the same value in
    /// both interfaces).
    pub status_ignore: usize,
    pub any_source: i32,
    pub any_tag: i32,
    pub proc_null: i32,
    /// `MPI_IN_PLACE`.
    pub in_place: usize,
    /// Bytes of one `MPI_Status`.
    pub status_bytes: usize,
    source_at: usize,
    tag_at: usize,
}

/// The running process's MPI interface (decided on first use, after the
/// program called an MPI function, so its library is loaded).
pub fn abi() -> &'static Abi {
    static ABI: OnceLock<Abi> = OnceLock::new();
    ABI.get_or_init(detect)
}

/// The address `name` resolves to in the process's global scope (the
/// program's own copy of a data symbol when it has one, as the program's
/// references use), or 0.
fn address_of(name: &CStr) -> usize {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

fn detect() -> Abi {
    let world = address_of(c"ompi_mpi_comm_world");
    if world != 0 {
        // Open MPI 4 and 5: `MPI_COMM_WORLD` is `&ompi_mpi_comm_world`,
        // statuses are {source, tag, error, cancelled, size_t count}.
        return Abi {
            open_mpi: true,
            comm_world: world,
            comm_self: address_of(c"ompi_mpi_comm_self"),
            comm_null: address_of(c"ompi_mpi_comm_null"),
            byte: address_of(c"ompi_mpi_byte"),
            status_ignore: 0,
            any_source: -1,
            any_tag: -1,
            proc_null: -2,
            in_place: 1,
            status_bytes: 24,
            source_at: 0,
            tag_at: 4,
        };
    }
    // MPICH's interface: fixed integer handles; statuses are {count_lo,
    // count_hi_and_cancelled, source, tag, error}.
    Abi {
        open_mpi: false,
        comm_world: 0x4400_0000,
        comm_self: 0x4400_0001,
        comm_null: 0x0400_0000,
        byte: 0x4c00_010d,
        status_ignore: 1,
        any_source: -2,
        any_tag: -1,
        proc_null: -1,
        in_place: usize::MAX,
        status_bytes: 20,
        source_at: 8,
        tag_at: 12,
    }
}

impl Abi {
    /// `h` with the bits the interface does not define cleared, so equal
    /// handles compare equal.
    #[inline]
    pub fn handle(&self, h: Handle) -> Handle {
        if self.open_mpi {
            h
        } else {
            h & 0xffff_ffff
        }
    }

    /// Bytes of a handle in memory (arrays of requests, out-parameters).
    pub fn handle_bytes(&self) -> usize {
        if self.open_mpi {
            8
        } else {
            4
        }
    }

    /// The handle stored at `p`.
    ///
    /// # Safety
    /// `p` points to a readable handle of this interface.
    pub unsafe fn read_handle(&self, p: *const u8) -> Handle {
        if self.open_mpi {
            // SAFETY: contract: 8 readable bytes.
            unsafe { std::ptr::read_unaligned(p as *const u64) as usize }
        } else {
            // SAFETY: contract: 4 readable bytes.
            unsafe { std::ptr::read_unaligned(p as *const u32) as usize }
        }
    }

    /// Whether `status` is one the program asked MPI not to fill.
    pub fn ignored(&self, status: *const u8) -> bool {
        status as usize == self.status_ignore || status.is_null()
    }

    /// The source and tag of a filled status.
    ///
    /// # Safety
    /// `status` points to an `MPI_Status` of this interface.
    pub unsafe fn source_and_tag(&self, status: *const u8) -> (i32, i32) {
        // SAFETY: contract: both fields lie inside the status.
        unsafe {
            (
                std::ptr::read_unaligned(status.add(self.source_at) as *const i32),
                std::ptr::read_unaligned(status.add(self.tag_at) as *const i32),
            )
        }
    }
}

/// Room for one status of either interface (the largest, aligned).
pub const STATUS_ROOM: usize = 32;
