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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_follows_a_nul_and_the_length_counts_no_terminator() {
        let (addr, len) = abstract_address("strobe-1").unwrap();
        assert_eq!(addr.sun_family, libc::AF_UNIX as libc::sa_family_t);
        assert_eq!(addr.sun_path[0], 0);
        let name: Vec<u8> = addr.sun_path[1..9].iter().map(|&c| c as u8).collect();
        assert_eq!(name, b"strobe-1");
        assert_eq!(len as usize, std::mem::size_of::<libc::sa_family_t>() + 9);
        let longest = "x".repeat(addr.sun_path.len() - 1);
        assert!(abstract_address(&longest).is_ok());
        assert!(abstract_address(&format!("{longest}x")).is_err());
    }
}
