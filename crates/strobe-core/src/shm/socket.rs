//! The address of the collector's socket, shared by the runtime (which
//! connects) and the collector (which listens).
//!
//! Owns the abstract-namespace `sockaddr_un` encoding (a leading NUL, no
//! file anywhere). Pure computation; no descriptor is opened here.

use std::io;

/// The abstract-namespace address for `name` and its length.
pub fn abstract_address(name: &str) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain old data; zero is a valid start.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = name.as_bytes();
    if bytes.len() + 1 > addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("socket name '{name}' is too long"),
        ));
    }
    for (dst, &src) in addr.sun_path[1..].iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + 1 + bytes.len()) as libc::socklen_t;
    Ok((addr, len))
}
