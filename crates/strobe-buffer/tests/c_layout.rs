//! The C header and the Rust types agree: a C program built with `cc`
//! against `include/strobe_tool.h` prints sizes and offsets, which must
//! equal Rust's.

use std::mem::{offset_of, size_of};
use std::path::Path;
use std::process::Command;
use strobe_buffer::callback_tracing::CallbackRecord;
use strobe_buffer::ffi::ToolApi;
use strobe_buffer::record::*;
use strobe_buffer::BufferStats;

#[test]
fn header_layouts_match_rust() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("strobe-buffer-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    std::fs::write(
        &src,
        r#"#include "strobe_tool.h"
#include <stdio.h>
#include <stddef.h>
#define S(t) printf(#t " %zu\n", sizeof(t));
#define O(t, f) printf(#t "." #f " %zu\n", offsetof(t, f));
int main(void) {
    S(strobe_record_header_t) O(strobe_record_header_t, payload)
    S(strobe_region_record_t) O(strobe_region_record_t, name_id)
    S(strobe_sample_record_t) O(strobe_sample_record_t, frame_count)
    S(strobe_library_call_record_t) O(strobe_library_call_record_t, return_value)
    S(strobe_memory_record_t) O(strobe_memory_record_t, tid)
    S(strobe_counter_record_t) O(strobe_counter_record_t, value)
    S(strobe_marker_record_t) O(strobe_marker_record_t, text_len)
    S(strobe_xpti_record_t) O(strobe_xpti_record_t, stream_id)
    S(strobe_callback_record_t) O(strobe_callback_record_t, payload)
    S(strobe_buffer_stats_t) O(strobe_buffer_stats_t, flushes)
    S(strobe_tool_api_t) O(strobe_tool_api_t, emit) O(strobe_tool_api_t, configure_buffer_tracing_service)
    printf("version %u\n", STROBE_TOOL_API_VERSION);
    return 0;
}
"#,
    )
    .unwrap();
    let exe = dir.join("layout");
    let st = Command::new("cc")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(root.join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("cc must be installed");
    assert!(st.success());
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let expected = [
        ("strobe_record_header_t", size_of::<RecordHeader>()),
        (
            "strobe_record_header_t.payload",
            offset_of!(RecordHeader, payload),
        ),
        ("strobe_region_record_t", size_of::<RegionRecord>()),
        (
            "strobe_region_record_t.name_id",
            offset_of!(RegionRecord, name_id),
        ),
        ("strobe_sample_record_t", size_of::<SampleRecord>()),
        (
            "strobe_sample_record_t.frame_count",
            offset_of!(SampleRecord, frame_count),
        ),
        (
            "strobe_library_call_record_t",
            size_of::<LibraryCallRecord>(),
        ),
        (
            "strobe_library_call_record_t.return_value",
            offset_of!(LibraryCallRecord, return_value),
        ),
        ("strobe_memory_record_t", size_of::<MemoryRecord>()),
        ("strobe_memory_record_t.tid", offset_of!(MemoryRecord, tid)),
        ("strobe_counter_record_t", size_of::<CounterRecord>()),
        (
            "strobe_counter_record_t.value",
            offset_of!(CounterRecord, value),
        ),
        ("strobe_marker_record_t", size_of::<MarkerRecord>()),
        (
            "strobe_marker_record_t.text_len",
            offset_of!(MarkerRecord, text_len),
        ),
        ("strobe_xpti_record_t", size_of::<XptiRecord>()),
        (
            "strobe_xpti_record_t.stream_id",
            offset_of!(XptiRecord, stream_id),
        ),
        ("strobe_callback_record_t", size_of::<CallbackRecord>()),
        (
            "strobe_callback_record_t.payload",
            offset_of!(CallbackRecord, payload),
        ),
        ("strobe_buffer_stats_t", size_of::<BufferStats>()),
        (
            "strobe_buffer_stats_t.flushes",
            offset_of!(BufferStats, flushes),
        ),
        ("strobe_tool_api_t", size_of::<ToolApi>()),
        ("strobe_tool_api_t.emit", offset_of!(ToolApi, emit)),
        (
            "strobe_tool_api_t.configure_buffer_tracing_service",
            offset_of!(ToolApi, configure_buffer_tracing_service),
        ),
        ("version", strobe_buffer::ffi::API_VERSION as usize),
    ];
    let got: Vec<(String, usize)> = text
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    assert_eq!(got.len(), expected.len(), "{text}");
    for ((gk, gv), (ek, ev)) in got.iter().zip(expected.iter()) {
        assert_eq!(gk, ek);
        assert_eq!(gv, ev, "{ek}: C says {gv}, Rust says {ev}");
    }
}
