//! Builds the C++ half (`cxx/objects.cpp`: the interface objects of XPTI
//! 2026.2) and names the library `libxptifw.so.1` (its SONAME), so a
//! subscriber linked against Intel's framework binds to strobe's dispatcher
//! once a runtime has loaded it, and a program linked with `-lstrobe_xpti`
//! records that name.
fn main() {
    println!("cargo:rerun-if-changed=cxx/objects.cpp");
    cc::Build::new()
        .cpp(true)
        .file("cxx/objects.cpp")
        .flag("-std=c++17")
        .flag_if_supported("-Wall")
        .compile("strobe_xpti_cxx");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libxptifw.so.1");
}
