//! Output formats: names, aliases and file extensions.
//!
//! Owns [`Format`] and its parsing. It never writes anything.

use std::str::FromStr;

use crate::error::ExportError;

/// An output format of `strobe convert`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Perfetto protobuf trace (`pftrace`, `perfetto`).
    Perfetto,
    /// Chrome trace-event JSON (`json`, `chrome`).
    Chrome,
    /// Folded stacks text (`folded`, `collapsed`).
    Folded,
    /// SVG flamegraph (`svg`, `flamegraph`).
    Svg,
    /// gzip-compressed pprof protobuf (`pprof`).
    Pprof,
    /// Firefox Profiler processed JSON (`firefox`, `fxprof`).
    Firefox,
    /// CSV files, one per table (`csv`).
    Csv,
    /// A Parquet dataset: a directory, one sub-directory per table
    /// (`parquet`).
    Parquet,
}

impl Format {
    /// Every format, in the order `strobe convert --help` lists them.
    pub const ALL: [Format; 8] = [
        Format::Perfetto,
        Format::Chrome,
        Format::Folded,
        Format::Svg,
        Format::Pprof,
        Format::Firefox,
        Format::Csv,
        Format::Parquet,
    ];

    /// The canonical name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Perfetto => "pftrace",
            Format::Chrome => "json",
            Format::Folded => "folded",
            Format::Svg => "svg",
            Format::Pprof => "pprof",
            Format::Firefox => "firefox",
            Format::Csv => "csv",
            Format::Parquet => "parquet",
        }
    }

    /// The file name suffix of the output (CSV writes one file per table;
    /// Parquet a directory named so).
    pub fn extension(self) -> &'static str {
        match self {
            Format::Perfetto => ".pftrace",
            Format::Chrome => ".trace.json",
            Format::Folded => ".folded",
            Format::Svg => ".svg",
            Format::Pprof => ".pb.gz",
            Format::Firefox => ".firefox.json",
            Format::Csv => ".csv",
            Format::Parquet => ".parquet",
        }
    }
}

/// What the viewers of a format open: the largest file they load and who
/// they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewerLimit {
    /// Bytes above which the viewers fail or give up.
    pub bytes: u64,
    /// The viewers, as a user knows them.
    pub viewers: &'static str,
    /// What to use instead.
    pub instead: &'static str,
}

impl Format {
    /// The file size the viewers this format is for can open, for formats
    /// whose viewers have one (browsers hold a JSON file as one string,
    /// capped at 512 MiB to 1 GiB; the Perfetto UI keeps a trace in 2 GiB of
    /// WebAssembly memory).
    pub fn viewer_limit(self) -> Option<ViewerLimit> {
        match self {
            Format::Chrome => Some(ViewerLimit {
                bytes: 512 << 20,
                viewers: "the Perfetto UI, chrome://tracing and speedscope",
                instead: "-f pftrace (Perfetto) or -f firefox",
            }),
            Format::Firefox => Some(ViewerLimit {
                bytes: 512 << 20,
                viewers: "the Firefox Profiler",
                instead: "-f pftrace (Perfetto)",
            }),
            Format::Perfetto => Some(ViewerLimit {
                bytes: 2 << 30,
                viewers: "the Perfetto UI in a browser",
                instead: "trace_processor --httpd beside the UI, or -f parquet for SQL",
            }),
            Format::Svg => Some(ViewerLimit {
                bytes: 128 << 20,
                viewers: "web browsers",
                instead: "-f folded or -f pprof",
            }),
            Format::Folded | Format::Pprof | Format::Csv | Format::Parquet => None,
        }
    }

    /// What to tell the user when a file of this format at `path` came out
    /// `bytes` long: `None` when its viewers open it.
    pub fn too_large(self, path: &std::path::Path, bytes: u64) -> Option<String> {
        let limit = self.viewer_limit()?;
        (bytes > limit.bytes).then(|| {
            format!(
                "{} is {:.1} GiB, more than {} open (about {} MiB): choose a time window \
                 (--start/--end or --start-marker/--end-marker), or use {}",
                path.display(),
                bytes as f64 / f64::from(1u32 << 30),
                limit.viewers,
                limit.bytes >> 20,
                limit.instead
            )
        })
    }
}

impl FromStr for Format {
    type Err = ExportError;
    fn from_str(s: &str) -> Result<Format, ExportError> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "pftrace" | "perfetto" | "proto" => Format::Perfetto,
            "json" | "chrome" | "trace-json" => Format::Chrome,
            "folded" | "collapsed" => Format::Folded,
            "svg" | "flamegraph" => Format::Svg,
            "pprof" => Format::Pprof,
            "firefox" | "fxprof" | "gecko" => Format::Firefox,
            "csv" => Format::Csv,
            "parquet" | "pq" => Format::Parquet,
            _ => return Err(ExportError::UnknownFormat(s.to_string())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_past_what_their_viewers_open_are_named_with_a_way_out() {
        let path = std::path::Path::new("run.trace.json");
        assert_eq!(Format::Chrome.too_large(path, 512 << 20), None);
        let said = Format::Chrome.too_large(path, 5 << 30).unwrap();
        assert!(said.starts_with("run.trace.json is 5.0 GiB"), "{said}");
        assert!(
            said.contains("--start") && said.contains("-f pftrace"),
            "{said}"
        );
        assert!(Format::Perfetto.too_large(path, 3 << 30).is_some());
        assert_eq!(Format::Perfetto.too_large(path, 1 << 30), None);
        // Formats read by tools rather than a browser have no limit.
        assert_eq!(Format::Parquet.too_large(path, u64::MAX), None);
        assert_eq!(Format::Folded.too_large(path, u64::MAX), None);
    }
}
