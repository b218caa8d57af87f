//! C tool plugins: the example tool `examples/tools/count_records.c` and a
//! few broken tools are compiled with `cc`, loaded through the loader, and
//! checked through what they write.

use std::path::{Path, PathBuf};
use std::process::Command;
use strobe_buffer::record::{
    CounterRecord, LibraryCallRecord, MemoryRecord, RegionRecord, XptiRecord,
};
use strobe_buffer::tool::{self, ToolError};

/// Tools subscribe process-wide and `tool::finalize` acts on every loaded
/// tool, so the tests in this file take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn out_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strobe-buffer-c-tool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles C source (a file path or inline text) into a shared library.
fn build(name: &str, source: &Path) -> PathBuf {
    let out = out_dir().join(format!("lib{name}.so"));
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wall", "-Werror", "-O1", "-I"])
        .arg(repo_root().join("include"))
        .arg(source)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("cc must be installed to build the C tools");
    assert!(status.success(), "cc failed for {}", source.display());
    out
}

fn build_inline(name: &str, text: &str) -> PathBuf {
    let src = out_dir().join(format!("{name}.c"));
    std::fs::write(&src, text).unwrap();
    build(name, &src)
}

#[test]
fn example_tool_counts_records_per_kind() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lib = build(
        "count_records",
        &repo_root().join("examples/tools/count_records.c"),
    );
    let output = out_dir().join("counts.txt");
    std::env::set_var("COUNT_RECORDS_OUTPUT", &output);

    // A library without the entry point and one built for another API
    // version are refused with a warning naming the file; the good one in
    // the same list still loads.
    let no_entry = build_inline(
        "no_entry",
        "#include \"strobe_tool.h\"\nSTROBE_TOOL_DEFINE_API_VERSION;\nint unrelated(void) { return 1; }\n",
    );
    let wrong_version = build_inline(
        "wrong_version",
        "#include \"strobe_tool.h\"\n\
         __attribute__((visibility(\"default\"))) const uint32_t strobe_tool_api_version = (7u << 16);\n\
         int strobe_tool_configure(uint32_t v, const strobe_tool_api_t *a, void **d) { (void)v; (void)a; (void)d; return 0; }\n",
    );
    let missing = out_dir().join("does-not-exist.so");
    let list = format!(
        "{}:{}::{}:{}",
        no_entry.display(),
        wrong_version.display(),
        missing.display(),
        lib.display()
    );
    let report = tool::load_list(&list);
    assert_eq!(report.loaded.len(), 1, "{:?}", report.errors);
    assert_eq!(report.loaded[0].path, lib);
    assert!(report.loaded[0].has_finalize);
    assert_eq!(report.errors.len(), 3);
    match &report.errors[0] {
        ToolError::MissingSymbol { path, symbol } => {
            assert_eq!(path, &no_entry);
            assert_eq!(*symbol, "strobe_tool_configure");
        }
        e => panic!("unexpected {e}"),
    }
    match &report.errors[1] {
        e @ ToolError::IncompatibleVersion {
            path,
            tool_major: 7,
            host_major: 1,
            ..
        } => {
            assert_eq!(path, &wrong_version);
            assert!(e.to_string().contains(&wrong_version.display().to_string()));
        }
        e => panic!("unexpected {e}"),
    }
    assert!(matches!(&report.errors[2], ToolError::Open { path, .. } if path == &missing));

    // Emit records of several kinds through the global producer API.
    for i in 0..1000u64 {
        strobe_buffer::emit(
            0,
            &RegionRecord {
                name_id: i,
                ..Default::default()
            },
        );
    }
    for _ in 0..500 {
        strobe_buffer::emit(3, &MemoryRecord::default());
    }
    for _ in 0..250 {
        strobe_buffer::emit(1, &CounterRecord::default());
    }
    for _ in 0..125 {
        strobe_buffer::emit(2, &LibraryCallRecord::default());
    }
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..10_000 {
                    strobe_buffer::emit(0, &XptiRecord::default());
                }
            });
        }
    });
    strobe_buffer::emit_sample(0, &Default::default(), &[1, 2, 3]);
    strobe_buffer::emit_marker(0, &Default::default(), b"phase 1");

    assert_eq!(tool::finalize(), 1);
    let text = std::fs::read_to_string(&output).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..7],
        [
            "region 1000",
            "sample 1",
            "library_call 125",
            "memory 500",
            "counter 250",
            "marker 1",
            "xpti 40000"
        ],
        "{text}"
    );
    assert_eq!(lines[7], "dropped 0");
    assert_eq!(tool::finalize(), 0, "each tool is finalized once");
}

#[test]
fn a_failing_c_callback_is_reported_and_delivery_goes_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // This tool's callback fails for every other batch and uses its own
    // callback thread; it records what it saw and the buffer's stats.
    let lib = build_inline(
        "failing_callback",
        r#"#include "strobe_tool.h"
#include <stdio.h>
#include <stdlib.h>
STROBE_TOOL_DEFINE_API_VERSION;
static const strobe_tool_api_t *api;
static strobe_buffer_id_t buf;
static strobe_context_id_t ctx;
static unsigned long long batches, records;
static int cb(strobe_context_id_t c, strobe_buffer_id_t b, const strobe_record_header_t *h,
              size_t n, void *data, uint64_t drops) {
    (void)c; (void)b; (void)h; (void)data; (void)drops;
    batches++; records += n;
    return (batches % 2) ? 42 : 0;
}
int strobe_tool_configure(uint32_t v, const strobe_tool_api_t *a, void **d) {
    (void)v; (void)d; api = a;
    strobe_callback_thread_t t;
    uint32_t ops[] = {2};
    if (a->create_context(&ctx)) return 1;
    if (a->create_buffer(ctx, 4096, 0, STROBE_BUFFER_POLICY_LOSSLESS, cb, NULL, &buf)) return 2;
    if (a->create_callback_thread(&t) || a->assign_callback_thread(buf, t)) return 3;
    if (a->configure_buffer_tracing_service(ctx, STROBE_KIND_MARKER, ops, 1, buf)) return 4;
    if (a->configure_buffer_tracing_service(ctx, STROBE_KIND_MARKER, NULL, 0, buf)
        != STROBE_STATUS_SERVICE_ALREADY_CONFIGURED) return 5;
    if (a->configure_buffer_tracing_service(ctx, 99, NULL, 0, buf) != STROBE_STATUS_UNKNOWN_KIND) return 6;
    if (a->create_buffer(ctx, 4096, 0, 77, cb, NULL, &buf) != STROBE_STATUS_INVALID_ARGUMENT) return 7;
    return a->start_context(ctx);
}
void strobe_tool_finalize(void *d) {
    (void)d;
    strobe_buffer_stats_t s;
    api->buffer_stats(buf, &s);
    FILE *f = fopen(getenv("FAILING_TOOL_OUTPUT"), "w");
    fprintf(f, "%llu %llu %llu %llu %s %s\n", batches, records,
            (unsigned long long)s.callback_failures, (unsigned long long)s.records_delivered,
            api->query_kind_name(STROBE_KIND_MARKER), api->query_operation_name(STROBE_KIND_MARKER, 2));
    fclose(f);
}
"#,
    );
    let output = out_dir().join("failing.txt");
    std::env::set_var("FAILING_TOOL_OUTPUT", &output);
    std::env::set_var(tool::TOOL_ENV, lib.display().to_string());
    let report = tool::load_from_env();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    // Only marker operation 2 ("latency_begin") is traced.
    for op in 0..4 {
        for _ in 0..10 {
            strobe_buffer::emit_marker(op, &Default::default(), b"x");
        }
    }
    tool::finalize();
    let text = std::fs::read_to_string(&output).unwrap();
    // Watermark 0: one batch per record; every other callback failed.
    assert_eq!(text.trim(), "10 10 5 10 marker latency_begin");
}

#[test]
fn a_tool_that_declines_is_reported_and_never_finalized() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let marker = out_dir().join("declined-finalized.txt");
    let lib = build_inline(
        "declines",
        &format!(
            r#"#include "strobe_tool.h"
#include <stdio.h>
STROBE_TOOL_DEFINE_API_VERSION;
int strobe_tool_configure(uint32_t v, const strobe_tool_api_t *a, void **d) {{
    (void)a; (void)d;
    return v == STROBE_TOOL_API_VERSION ? 3 : 4;
}}
void strobe_tool_finalize(void *d) {{
    (void)d;
    FILE *f = fopen("{}", "w");
    if (f) fclose(f);
}}
"#,
            marker.display()
        ),
    );
    let err = tool::load(&lib).unwrap_err();
    assert_eq!(
        err,
        ToolError::Declined {
            path: lib.clone(),
            status: 3
        },
        "host passes its version"
    );
    assert!(err.to_string().contains(&lib.display().to_string()));
    assert!(!tool::loaded().contains(&lib));
    tool::finalize();
    assert!(!marker.exists(), "a declining tool is not finalized");
}
