//! Compiles the C part of the runtime: the variadic `exec` functions,
//! which Rust cannot define on stable.

fn main() {
    println!("cargo:rerun-if-changed=csrc/exec_variadic.c");
    cc::Build::new()
        .file("csrc/exec_variadic.c")
        .flag_if_supported("-fvisibility=default")
        .compile("strobe_exec_variadic");
}
