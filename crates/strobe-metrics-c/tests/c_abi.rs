//! The C ABI of `libstrobe_metrics.so` exercised from C: programs in
//! `tests/programs/metrics_*.c` are compiled with `cc` against
//! `include/strobe_metrics.h`, linked with the freshly built library and run
//! as real processes; a tool library is loaded with `dlopen` in a child
//! process that drives the runtime's intercept entry points.

use std::collections::BTreeSet;
use std::ffi::{c_char, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use strobe_metrics::capi::{self, *};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn include_dir() -> PathBuf {
    repo_root().join("include")
}

fn program(name: &str) -> PathBuf {
    repo_root().join("tests/programs").join(name)
}

/// The directory holding the cdylib built with this test
/// (target/<profile>/deps or target/<profile>). `cargo test` does not
/// build a cdylib-only package's library for its integration tests, so a
/// fresh checkout builds it here, once, into the same target directory.
fn lib_dir() -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    let exe = std::env::current_exe().expect("current exe");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    let profile = deps.parent().expect("profile dir").to_path_buf();
    let find = || {
        [deps.clone(), profile.clone()]
            .into_iter()
            .find(|d| d.join("libstrobe_metrics.so").exists())
    };
    BUILT.call_once(|| {
        if find().is_none() {
            let mut cargo = Command::new(env!("CARGO"));
            cargo.args(["build", "-q", "-p", "strobe-metrics-c"]);
            if profile.file_name().is_some_and(|n| n == "release") {
                cargo.arg("--release");
            }
            let target = profile.parent().expect("target dir");
            let status = cargo
                .env("CARGO_TARGET_DIR", target)
                .current_dir(repo_root())
                .status()
                .expect("cargo runs");
            assert!(status.success(), "cargo build -p strobe-metrics-c");
        }
    });
    find().unwrap_or_else(|| {
        panic!(
            "libstrobe_metrics.so not found next to {}: build it with `cargo build -p strobe-metrics-c`",
            exe.display()
        )
    })
}

fn work_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("strobe-metrics-c")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn compile(args: &[&str]) {
    let out = Command::new("cc")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run cc: {e}"));
    assert!(
        out.status.success(),
        "cc {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compiles `src` (a program, or a shared library with `-shared`) against
/// the header, linked with the built library.
fn build(dir: &Path, src: &str, out: &str, extra: &[&str]) -> PathBuf {
    let exe = dir.join(out);
    let lib = lib_dir();
    let inc = format!("-I{}", s(&include_dir()));
    let l = format!("-L{}", s(&lib));
    let rpath = format!("-Wl,-rpath,{}", s(&lib));
    let src = program(src);
    let mut args = vec!["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        &inc,
        s(&src),
        &l,
        "-lstrobe_metrics",
        &rpath,
        "-lpthread",
        "-lm",
        "-o",
        s(&exe),
    ]);
    compile(&args);
    exe
}

fn run(exe: &Path) -> Output {
    let mut cmd = Command::new(exe);
    // cargo's LD_LIBRARY_PATH would win over the RUNPATH and could pick a
    // stale uplifted copy of the library; the definitions are the built-in
    // ones and the PMU sizes the machine's.
    for k in ["LD_LIBRARY_PATH", "STROBE_METRICS", "STROBE_PMU_SLOTS"] {
        cmd.env_remove(k);
    }
    cmd.output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Every `sizeof`/`offsetof`/value line the C layout program prints,
/// computed from the Rust types.
fn rust_layout() -> Vec<String> {
    use std::mem::{offset_of, size_of};
    let mut v = Vec::new();
    let mut size = |c: &str, n: usize| v.push(format!("sizeof {c} {n}"));
    size("strobe_metrics_status_t", size_of::<Status>());
    size("strobe_metrics_info_data_t", size_of::<InfoData>());
    size(
        "strobe_metrics_feature_parameter_t",
        size_of::<FeatureParameter>(),
    );
    size("strobe_metrics_data_t", size_of::<Data>());
    size("strobe_metrics_feature_t", size_of::<Feature>());
    size("strobe_metrics_group_t", size_of::<Group>());
    size("strobe_metrics_properties_t", size_of::<Properties>());
    size("strobe_metrics_callback_data_t", size_of::<CallbackData>());
    size("strobe_metrics_intercepting_t", size_of::<Intercepting>());
    let offsets: &[(&str, usize)] = &[
        (
            "strobe_metrics_info_data_t.kind",
            offset_of!(InfoData, kind),
        ),
        (
            "strobe_metrics_info_data_t.metric.name",
            offset_of!(InfoData, u.metric.name),
        ),
        (
            "strobe_metrics_info_data_t.metric.description",
            offset_of!(InfoData, u.metric.description),
        ),
        (
            "strobe_metrics_info_data_t.metric.expr",
            offset_of!(InfoData, u.metric.expr),
        ),
        (
            "strobe_metrics_info_data_t.metric.unit",
            offset_of!(InfoData, u.metric.unit),
        ),
        (
            "strobe_metrics_info_data_t.metric.event",
            offset_of!(InfoData, u.metric.event),
        ),
        (
            "strobe_metrics_info_data_t.trace.name",
            offset_of!(InfoData, u.trace.name),
        ),
        (
            "strobe_metrics_info_data_t.trace.description",
            offset_of!(InfoData, u.trace.description),
        ),
        (
            "strobe_metrics_info_data_t.trace.parameter_count",
            offset_of!(InfoData, u.trace.parameter_count),
        ),
        (
            "strobe_metrics_info_data_t.counter.name",
            offset_of!(InfoData, u.counter.name),
        ),
        (
            "strobe_metrics_info_data_t.counter.description",
            offset_of!(InfoData, u.counter.description),
        ),
        (
            "strobe_metrics_info_data_t.counter.unit",
            offset_of!(InfoData, u.counter.unit),
        ),
        (
            "strobe_metrics_info_data_t.counter.source",
            offset_of!(InfoData, u.counter.source),
        ),
        (
            "strobe_metrics_info_data_t.counter.unavailable_reason",
            offset_of!(InfoData, u.counter.unavailable_reason),
        ),
        (
            "strobe_metrics_info_data_t.counter.available",
            offset_of!(InfoData, u.counter.available),
        ),
        (
            "strobe_metrics_feature_parameter_t.parameter_name",
            offset_of!(FeatureParameter, parameter_name),
        ),
        (
            "strobe_metrics_feature_parameter_t.value",
            offset_of!(FeatureParameter, value),
        ),
        ("strobe_metrics_data_t.kind", offset_of!(Data, kind)),
        (
            "strobe_metrics_data_t.result_int32",
            offset_of!(Data, value.result_int32),
        ),
        (
            "strobe_metrics_data_t.result_int64",
            offset_of!(Data, value.result_int64),
        ),
        (
            "strobe_metrics_data_t.result_float",
            offset_of!(Data, value.result_float),
        ),
        (
            "strobe_metrics_data_t.result_double",
            offset_of!(Data, value.result_double),
        ),
        (
            "strobe_metrics_data_t.result_bytes.ptr",
            offset_of!(Data, value.result_bytes.ptr),
        ),
        (
            "strobe_metrics_data_t.result_bytes.size",
            offset_of!(Data, value.result_bytes.size),
        ),
        (
            "strobe_metrics_data_t.result_bytes.instances",
            offset_of!(Data, value.result_bytes.instances),
        ),
        ("strobe_metrics_feature_t.kind", offset_of!(Feature, kind)),
        ("strobe_metrics_feature_t.name", offset_of!(Feature, name)),
        (
            "strobe_metrics_feature_t.parameters",
            offset_of!(Feature, parameters),
        ),
        (
            "strobe_metrics_feature_t.parameter_count",
            offset_of!(Feature, parameter_count),
        ),
        ("strobe_metrics_feature_t.data", offset_of!(Feature, data)),
        ("strobe_metrics_group_t.index", offset_of!(Group, index)),
        (
            "strobe_metrics_group_t.features",
            offset_of!(Group, features),
        ),
        (
            "strobe_metrics_group_t.feature_count",
            offset_of!(Group, feature_count),
        ),
        ("strobe_metrics_group_t.context", offset_of!(Group, context)),
        (
            "strobe_metrics_properties_t.callback",
            offset_of!(Properties, callback),
        ),
        (
            "strobe_metrics_properties_t.callback_arg",
            offset_of!(Properties, callback_arg),
        ),
        (
            "strobe_metrics_properties_t.queue",
            offset_of!(Properties, queue),
        ),
        (
            "strobe_metrics_properties_t.queue_depth",
            offset_of!(Properties, queue_depth),
        ),
        (
            "strobe_metrics_properties_t.target",
            offset_of!(Properties, target),
        ),
        (
            "strobe_metrics_properties_t.pid",
            offset_of!(Properties, pid),
        ),
        (
            "strobe_metrics_properties_t.flags",
            offset_of!(Properties, flags),
        ),
        (
            "strobe_metrics_properties_t.max_slots",
            offset_of!(Properties, max_slots),
        ),
        (
            "strobe_metrics_properties_t.reserved0",
            offset_of!(Properties, reserved0),
        ),
        (
            "strobe_metrics_properties_t.reserved",
            offset_of!(Properties, reserved),
        ),
        (
            "strobe_metrics_callback_data_t.thread_id",
            offset_of!(CallbackData, thread_id),
        ),
        (
            "strobe_metrics_callback_data_t.region_name",
            offset_of!(CallbackData, region_name),
        ),
        (
            "strobe_metrics_callback_data_t.region_kind",
            offset_of!(CallbackData, region_kind),
        ),
        (
            "strobe_metrics_callback_data_t.depth",
            offset_of!(CallbackData, depth),
        ),
        (
            "strobe_metrics_callback_data_t.begin_ns",
            offset_of!(CallbackData, begin_ns),
        ),
        (
            "strobe_metrics_callback_data_t.end_ns",
            offset_of!(CallbackData, end_ns),
        ),
        (
            "strobe_metrics_intercepting_t.region_begin",
            offset_of!(Intercepting, region_begin),
        ),
        (
            "strobe_metrics_intercepting_t.region_end",
            offset_of!(Intercepting, region_end),
        ),
    ];
    for (c, o) in offsets {
        v.push(format!("offsetof {c} {o}"));
    }
    let values: &[(&str, i64)] = &[
        ("STROBE_METRICS_VERSION_MAJOR", capi::VERSION_MAJOR.into()),
        ("STROBE_METRICS_VERSION_MINOR", capi::VERSION_MINOR.into()),
        ("STROBE_METRICS_STATUS_SUCCESS", Status::SUCCESS.0.into()),
        ("STROBE_METRICS_STATUS_ERROR", Status::ERROR.0.into()),
        (
            "STROBE_METRICS_STATUS_ERROR_INVALID_ARGUMENT",
            Status::ERROR_INVALID_ARGUMENT.0.into(),
        ),
        (
            "STROBE_METRICS_STATUS_ERROR_UNKNOWN_FEATURE",
            Status::ERROR_UNKNOWN_FEATURE.0.into(),
        ),
        (
            "STROBE_METRICS_STATUS_ERROR_UNAVAILABLE",
            Status::ERROR_UNAVAILABLE.0.into(),
        ),
        (
            "STROBE_METRICS_STATUS_ERROR_GROUPS",
            Status::ERROR_GROUPS.0.into(),
        ),
        ("STROBE_METRICS_STATUS_ERROR_IO", Status::ERROR_IO.0.into()),
        (
            "STROBE_METRICS_STATUS_ERROR_DEFINITIONS",
            Status::ERROR_DEFINITIONS.0.into(),
        ),
        (
            "STROBE_METRICS_STATUS_ERROR_NOT_SUPPORTED",
            Status::ERROR_NOT_SUPPORTED.0.into(),
        ),
        (
            "STROBE_METRICS_STATUS_ERROR_INCOMPATIBLE_VERSION",
            Status::ERROR_INCOMPATIBLE_VERSION.0.into(),
        ),
        (
            "STROBE_METRICS_STATUS_ERROR_INTERNAL",
            Status::ERROR_INTERNAL.0.into(),
        ),
        ("STROBE_METRICS_INFO_KIND_METRIC", info_kind::METRIC.into()),
        (
            "STROBE_METRICS_INFO_KIND_METRIC_COUNT",
            info_kind::METRIC_COUNT.into(),
        ),
        ("STROBE_METRICS_INFO_KIND_TRACE", info_kind::TRACE.into()),
        (
            "STROBE_METRICS_INFO_KIND_TRACE_COUNT",
            info_kind::TRACE_COUNT.into(),
        ),
        (
            "STROBE_METRICS_INFO_KIND_COUNTER",
            info_kind::COUNTER.into(),
        ),
        (
            "STROBE_METRICS_INFO_KIND_COUNTER_COUNT",
            info_kind::COUNTER_COUNT.into(),
        ),
        (
            "STROBE_METRICS_FEATURE_KIND_METRIC",
            feature_kind::METRIC.into(),
        ),
        (
            "STROBE_METRICS_FEATURE_KIND_TRACE",
            feature_kind::TRACE.into(),
        ),
        ("STROBE_METRICS_DATA_KIND_UNINIT", data_kind::UNINIT.into()),
        ("STROBE_METRICS_DATA_KIND_INT32", data_kind::INT32.into()),
        ("STROBE_METRICS_DATA_KIND_INT64", data_kind::INT64.into()),
        ("STROBE_METRICS_DATA_KIND_FLOAT", data_kind::FLOAT.into()),
        ("STROBE_METRICS_DATA_KIND_DOUBLE", data_kind::DOUBLE.into()),
        ("STROBE_METRICS_DATA_KIND_BYTES", data_kind::BYTES.into()),
        ("STROBE_METRICS_MODE_STANDALONE", mode::STANDALONE.into()),
        ("STROBE_METRICS_MODE_CREATEQUEUE", mode::CREATEQUEUE.into()),
        ("STROBE_METRICS_MODE_SINGLEGROUP", mode::SINGLEGROUP.into()),
        ("STROBE_METRICS_TARGET_THREAD", target::THREAD.into()),
        ("STROBE_METRICS_TARGET_PROCESS", target::PROCESS.into()),
        ("STROBE_METRICS_FLAG_INHERIT", flags::INHERIT.into()),
        ("STROBE_METRICS_ALL_GROUPS", ALL_GROUPS.into()),
        ("STROBE_METRICS_REGION_KIND_USER", region_kind::USER.into()),
        (
            "STROBE_METRICS_REGION_KIND_XPTI_TASK",
            region_kind::XPTI_TASK.into(),
        ),
    ];
    for (c, n) in values {
        v.push(format!("value {c} {n}"));
    }
    v
}

#[test]
fn layouts_and_constants_match_the_header() {
    let dir = work_dir("layout");
    let exe = build(&dir, "metrics_layout.c", "metrics_layout", &[]);
    let o = run(&exe);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let c: BTreeSet<String> = out.lines().map(str::to_string).collect();
    let rust: BTreeSet<String> = rust_layout().into_iter().collect();
    let only_c: Vec<_> = c.difference(&rust).collect();
    let only_rust: Vec<_> = rust.difference(&c).collect();
    assert!(
        only_c.is_empty() && only_rust.is_empty(),
        "layouts differ\nC says: {only_c:#?}\nRust says: {only_rust:#?}"
    );
    assert_eq!(c.len(), out.lines().count(), "each line once");
}

#[test]
fn header_compiles_as_strict_c11_and_cxx() {
    let dir = work_dir("strict");
    let inc = format!("-I{}", s(&include_dir()));
    let c = dir.join("h.c");
    std::fs::write(
        &c,
        "#include \"strobe_metrics.h\"\nint main(void) { return 0; }\n",
    )
    .unwrap();
    compile(&[
        "-std=c11",
        "-pedantic",
        "-Wall",
        "-Wextra",
        "-Werror",
        &inc,
        "-fsyntax-only",
        s(&c),
    ]);
    if Command::new("c++").arg("--version").output().is_err() {
        eprintln!("skipped the C++ check: no c++ compiler on this machine");
        return;
    }
    let cxx = dir.join("h.cpp");
    std::fs::write(
        &cxx,
        "#include \"strobe_metrics.h\"\nint main() { strobe_metrics_feature_t f{}; \
         f.data.result_double = 1; return (int)f.data.kind; }\n",
    )
    .unwrap();
    let o = Command::new("c++")
        .args([
            "-std=c++11",
            "-pedantic",
            "-Wall",
            "-Wextra",
            "-Werror",
            &inc,
            "-fsyntax-only",
        ])
        .arg(&cxx)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The function names the header declares.
fn header_functions() -> BTreeSet<String> {
    let h = std::fs::read_to_string(include_dir().join("strobe_metrics.h")).unwrap();
    let mut out = BTreeSet::new();
    for line in h.lines() {
        let t = line.trim_start();
        if t.starts_with("typedef") || t.starts_with("/*") || t.starts_with('*') {
            continue;
        }
        let mut rest = t;
        while let Some(i) = rest.find("strobe_metrics_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            let name = &tail[..end];
            if tail[end..].starts_with('(') && !name.ends_with("_t") {
                out.insert(name.to_string());
            }
            rest = &tail[end..];
        }
    }
    out
}

#[test]
fn the_library_exports_every_function_of_the_header_and_nothing_else() {
    let funcs = header_functions();
    assert!(funcs.len() >= 26, "{funcs:?}");
    let path = CString::new(lib_dir().join("libstrobe_metrics.so").to_str().unwrap()).unwrap();
    // SAFETY: dlopen/dlsym with valid C strings; the handle is closed below.
    unsafe {
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        assert!(!h.is_null(), "dlopen failed");
        for f in &funcs {
            let name = CString::new(f.as_str()).unwrap();
            assert!(
                !libc::dlsym(h, name.as_ptr()).is_null(),
                "{f} is not exported"
            );
        }
        libc::dlclose(h);
    }
    match Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib_dir().join("libstrobe_metrics.so"))
        .output()
    {
        Ok(o) if o.status.success() => {
            let exported: BTreeSet<String> = String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().nth(2))
                .filter(|n| n.starts_with("strobe"))
                .map(str::to_string)
                .collect();
            assert_eq!(exported, funcs, "exports and header differ");
        }
        _ => eprintln!("skipped the export list check: no nm"),
    }
}

#[test]
fn c_program_uses_the_api_as_the_seed_does() {
    let dir = work_dir("api");
    let exe = build(&dir, "metrics_api.c", "metrics_api", &[]);
    let o = run(&exe);
    let (out, err) = text(&o);
    if o.status.code() == Some(77) {
        eprintln!("skipped: {out}");
        return;
    }
    assert!(
        o.status.success() && out.contains("METRICS API OK"),
        "{out}\n{err}"
    );
    assert!(
        out.contains("metric IPC = instructions / cycles [instructions/cycle]"),
        "{out}"
    );
    assert!(
        out.contains("counter task-clock (software, ns) available=1"),
        "{out}"
    );
    assert!(
        out.contains("singlegroup: strobe_metrics_open: the features need 2 groups"),
        "{out}"
    );
    assert!(
        out.contains(
            "unknown feature: strobe_metrics_open: feature `no-such-feature`: unknown event"
        ),
        "{out}"
    );
    println!("{out}");
}

// ---- the tool plugin -----------------------------------------------------

const CHILD_ENV: &str = "STROBE_METRICS_TOOL_CHILD";

type Intercept = unsafe extern "C" fn(*const CallbackData) -> Status;

fn thread_cpu_ns() -> u64 {
    strobe_metrics_core_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn strobe_metrics_core_clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn burn_ms(ms: u64) {
    let end = thread_cpu_ns() + ms * 1_000_000;
    let mut x = 1u64;
    while thread_cpu_ns() < end {
        for _ in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

fn touch_pages(n: usize) {
    // SAFETY: sysconf has no preconditions; the mapping is private,
    // anonymous, written only inside its bounds and unmapped here.
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let p = libc::mmap(
            std::ptr::null_mut(),
            n * page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        libc::madvise(p, n * page, libc::MADV_NOHUGEPAGE);
        for i in 0..n {
            p.cast::<u8>().add(i * page).write_volatile(i as u8);
        }
        libc::munmap(p, n * page);
    }
}

fn dlsym<T: Copy>(h: *mut c_void, name: &CStr) -> T {
    // SAFETY: a valid handle and name; the caller names the symbol's real type.
    let p = unsafe { libc::dlsym(h, name.as_ptr()) };
    assert!(!p.is_null(), "{name:?} not found");
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: `T` is a function pointer type of the symbol (checked size).
    unsafe { std::mem::transmute_copy(&p) }
}

fn data(name: &CStr, depth: u32) -> CallbackData {
    CallbackData {
        thread_id: 0,
        region_name: name.as_ptr(),
        region_kind: region_kind::USER,
        depth,
        begin_ns: 0,
        end_ns: 0,
    }
}

/// Parses `key value` pairs after `region NAME`.
fn field(line: &str, key: &str) -> u64 {
    let mut it = line.split_whitespace();
    while let Some(w) = it.next() {
        if w == key {
            return it.next().unwrap().parse().unwrap();
        }
    }
    panic!("no {key} in {line}")
}

/// Runs in the child: loads the library and the tool, then plays the
/// runtime around a few regions.
fn tool_child(tool: &str) {
    let lib = CString::new(lib_dir().join("libstrobe_metrics.so").to_str().unwrap()).unwrap();
    let tool = CString::new(tool).unwrap();
    // SAFETY: dlopen with valid paths; the libraries stay loaded.
    let (hl, ht) = unsafe {
        (
            libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL),
            libc::dlopen(tool.as_ptr(), libc::RTLD_NOW),
        )
    };
    assert!(!hl.is_null() && !ht.is_null(), "dlopen failed");
    let registered: unsafe extern "C" fn() -> i32 = dlsym(ht, c"metrics_tool_registered");
    let report: unsafe extern "C" fn() -> *const c_char = dlsym(ht, c"metrics_tool_report");
    let active: unsafe extern "C" fn() -> u32 = dlsym(hl, c"strobe_metrics_intercepting_active");
    let begin: Intercept = dlsym(hl, c"strobe_metrics_intercept_region_begin");
    let end: Intercept = dlsym(hl, c"strobe_metrics_intercept_region_end");
    let error: unsafe extern "C" fn() -> *const c_char = dlsym(hl, c"strobe_metrics_error_string");
    // SAFETY: the functions have these types (see the header and the tool).
    unsafe {
        assert_eq!(registered(), 0, "the tool's constructor registered");
        assert_eq!(active(), 1);
        let st = begin(&data(c"work", 0));
        if st == Status::ERROR_UNAVAILABLE {
            println!("SKIP: {}", CStr::from_ptr(error()).to_string_lossy());
            return;
        }
        assert_eq!(st, Status::SUCCESS, "{:?}", CStr::from_ptr(error()));
        let t0 = thread_cpu_ns();
        burn_ms(100);
        touch_pages(256);
        assert_eq!(begin(&data(c"inner", 1)), Status::SUCCESS);
        let i0 = thread_cpu_ns();
        burn_ms(40);
        let i1 = thread_cpu_ns();
        // The runtime's pop has no name: the begin's is used.
        let mut e = data(c"inner", 1);
        e.region_name = std::ptr::null();
        assert_eq!(end(&e), Status::SUCCESS);
        assert_eq!(begin(&data(c"uncounted", 1)), Status::SUCCESS);
        assert_eq!(end(&data(c"uncounted", 1)), Status::SUCCESS);
        let t1 = thread_cpu_ns();
        assert_eq!(end(&data(c"work", 0)), Status::SUCCESS);
        // A region on another thread counts that thread only.
        let (tid, cpu) = std::thread::spawn(move || {
            let tid = libc::gettid() as u64;
            assert_eq!(begin(&data(c"thread2", 0)), Status::SUCCESS);
            let c0 = thread_cpu_ns();
            burn_ms(60);
            let c1 = thread_cpu_ns();
            assert_eq!(end(&data(c"thread2", 0)), Status::SUCCESS);
            (tid, c1 - c0)
        })
        .join()
        .unwrap();
        let rep = CStr::from_ptr(report()).to_string_lossy().into_owned();
        println!("{rep}");
        let line = |name: &str| {
            rep.lines()
                .find(|l| l.starts_with(&format!("region {name} ")))
                .unwrap_or_else(|| panic!("no region {name} in\n{rep}"))
                .to_string()
        };
        assert!(!rep.contains("error"), "{rep}");
        let within = |got: u64, want: u64| (got as f64 - want as f64).abs() <= 0.1 * want as f64;
        let work = line("work");
        let (work_tc, work_cpu) = (field(&work, "task-clock"), t1 - t0);
        assert!(within(work_tc, work_cpu), "work: {work_tc} vs {work_cpu}");
        assert!(field(&work, "page-faults") >= 256, "{work}");
        assert_eq!(
            (field(&work, "kinds"), field(&work, "completions")),
            (2, 1),
            "{work}"
        );
        assert_eq!(field(&work, "tid"), libc::gettid() as u64, "{work}");
        assert!(field(&work, "span") >= work_cpu, "{work}");
        let inner = line("inner");
        let (inner_tc, inner_cpu) = (field(&inner, "task-clock"), i1 - i0);
        assert!(
            within(inner_tc, inner_cpu),
            "inner: {inner_tc} vs {inner_cpu}"
        );
        assert_eq!(field(&inner, "depth"), 1);
        assert!(field(&inner, "page-faults") < 256, "{inner}");
        assert!(rep.contains("region uncounted uncounted"), "{rep}");
        let t2 = line("thread2");
        assert_eq!(field(&t2, "tid"), tid, "{t2}");
        assert!(within(field(&t2, "task-clock"), cpu), "{t2} vs {cpu}");
        // Order: inner, uncounted, work, thread2.
        let order: Vec<&str> = rep.lines().map(|l| l.split(' ').nth(1).unwrap()).collect();
        assert_eq!(order, ["inner", "uncounted", "work", "thread2"], "{rep}");
        println!("TOOL OK");
    }
}

#[test]
fn tool_plugin_gets_per_region_counts() {
    if let Ok(tool) = std::env::var(CHILD_ENV) {
        tool_child(&tool);
        return;
    }
    let dir = work_dir("tool");
    let tool = build(
        &dir,
        "metrics_tool.c",
        "libmetrics_tool.so",
        &["-shared", "-fPIC"],
    );
    let o = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tool_plugin_gets_per_region_counts",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &tool)
        .env_remove("STROBE_METRICS")
        .env_remove("STROBE_PMU_SLOTS")
        .output()
        .unwrap();
    let (out, err) = text(&o);
    if out.contains("SKIP: ") {
        eprintln!("skipped: {out}");
        return;
    }
    assert!(
        o.status.success() && out.contains("TOOL OK"),
        "{out}\n{err}"
    );
    print!("{out}");
}
