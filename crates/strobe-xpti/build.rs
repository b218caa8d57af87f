//! Gives the dispatcher a soname so a subscriber linked with -lstrobe_xpti and
//! the copy a proxy dlopens by path are recognised as one library.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libstrobe_xpti.so");
}
