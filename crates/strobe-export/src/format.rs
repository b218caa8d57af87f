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
