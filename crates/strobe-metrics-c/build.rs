//! Gives the library its soname, so a tool linked with -lstrobe_metrics and
//! a runtime that looks the library up with dlopen(RTLD_NOLOAD) by that
//! name find the one loaded copy.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libstrobe_metrics.so");
}
