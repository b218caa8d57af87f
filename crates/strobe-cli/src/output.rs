//! Tabular output in the formats every reporting command shares.
//!
//! Owns writing a header and rows as a comfy-table table, CSV, JSON (an
//! array of objects) or Markdown. CSV, JSON and Markdown stream row by row;
//! the table format has to see every row to size its columns. Table and
//! Markdown cells, read on terminals, have their control characters
//! escaped (names come from the profiled program); CSV and JSON keep the
//! text as it is, quoted for their format. It never computes anything.

use std::io::Write;

use strobe_core::escape::for_terminal;

use clap::ValueEnum;

/// Output format of `query` and `summary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned table for terminals.
    Table,
    /// Comma-separated values with a header row (RFC 4180 quoting).
    Csv,
    /// A JSON array of objects keyed by column name.
    Json,
    /// A GitHub-flavoured Markdown table.
    Markdown,
}

/// One value.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A real, printed in full.
    Real(f64),
    /// A real printed with a fixed number of decimals in table and Markdown
    /// output, in full in CSV and JSON (machine-readable).
    Fixed(f64, usize),
    /// Text.
    Text(String),
}

impl Cell {
    fn text(&self) -> String {
        match self {
            Cell::Null => String::new(),
            Cell::Int(v) => v.to_string(),
            Cell::Real(v) => v.to_string(),
            Cell::Fixed(v, d) => format!("{v:.d$}", d = *d),
            Cell::Text(s) => s.clone(),
        }
    }
    fn csv(&self) -> String {
        match self {
            Cell::Fixed(v, _) => v.to_string(),
            other => other.text(),
        }
    }
    fn json(&self) -> serde_json::Value {
        match self {
            Cell::Null => serde_json::Value::Null,
            Cell::Int(v) => (*v).into(),
            Cell::Real(v) | Cell::Fixed(v, _) => {
                serde_json::Number::from_f64(*v).map_or(serde_json::Value::Null, Into::into)
            }
            Cell::Text(s) => s.clone().into(),
        }
    }
}

impl From<strobe_db::Value> for Cell {
    fn from(v: strobe_db::Value) -> Cell {
        match v {
            strobe_db::Value::Null => Cell::Null,
            strobe_db::Value::Integer(i) => Cell::Int(i),
            strobe_db::Value::Real(r) => Cell::Real(r),
            strobe_db::Value::Text(s) => Cell::Text(s),
            strobe_db::Value::Blob(b) => Cell::Text(b.iter().map(|x| format!("{x:02x}")).collect()),
        }
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes one table in one format.
pub struct TableOut<W: Write> {
    format: Format,
    out: W,
    columns: Vec<String>,
    buffered: Vec<Vec<String>>,
    numeric: Vec<bool>,
    rows: u64,
}

impl<W: Write> TableOut<W> {
    /// Starts a table with these column names.
    pub fn begin(format: Format, mut out: W, columns: &[String]) -> std::io::Result<TableOut<W>> {
        match format {
            Format::Csv => writeln!(
                out,
                "{}",
                columns
                    .iter()
                    .map(|c| csv_field(c))
                    .collect::<Vec<_>>()
                    .join(",")
            )?,
            Format::Markdown => {
                writeln!(
                    out,
                    "| {} |",
                    columns
                        .iter()
                        .map(|c| c.replace('|', "\\|"))
                        .collect::<Vec<_>>()
                        .join(" | ")
                )?;
                writeln!(out, "|{}", "---|".repeat(columns.len()))?;
            }
            Format::Json => write!(out, "[")?,
            Format::Table => {}
        }
        Ok(TableOut {
            format,
            out,
            columns: columns.to_vec(),
            buffered: Vec::new(),
            numeric: vec![true; columns.len()],
            rows: 0,
        })
    }

    /// Writes one row (as many cells as columns).
    pub fn row(&mut self, cells: &[Cell]) -> std::io::Result<()> {
        match self.format {
            Format::Csv => writeln!(
                self.out,
                "{}",
                cells
                    .iter()
                    .map(|c| csv_field(&c.csv()))
                    .collect::<Vec<_>>()
                    .join(",")
            )?,
            Format::Markdown => writeln!(
                self.out,
                "| {} |",
                cells
                    .iter()
                    .map(|c| for_terminal(&c.text()).replace('|', "\\|"))
                    .collect::<Vec<_>>()
                    .join(" | ")
            )?,
            Format::Json => {
                let obj: serde_json::Map<String, serde_json::Value> = self
                    .columns
                    .iter()
                    .cloned()
                    .zip(cells.iter().map(Cell::json))
                    .collect();
                let sep = if self.rows == 0 { "\n  " } else { ",\n  " };
                write!(self.out, "{sep}{}", serde_json::Value::Object(obj))?;
            }
            Format::Table => {
                for (k, c) in cells.iter().enumerate() {
                    if matches!(c, Cell::Text(_)) {
                        if let Some(n) = self.numeric.get_mut(k) {
                            *n = false;
                        }
                    }
                }
                self.buffered.push(
                    cells
                        .iter()
                        .map(|c| for_terminal(&c.text()).into_owned())
                        .collect(),
                );
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// Ends the table and returns the writer.
    pub fn end(mut self) -> std::io::Result<W> {
        match self.format {
            Format::Json => writeln!(self.out, "{}]", if self.rows > 0 { "\n" } else { "" })?,
            Format::Table => {
                let mut t = comfy_table::Table::new();
                t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
                t.set_header(self.columns.clone());
                for r in self.buffered.drain(..) {
                    t.add_row(r);
                }
                // Numbers right-aligned, as in Nsight's tables.
                for (k, numeric) in self.numeric.iter().enumerate() {
                    if *numeric && self.rows > 0 {
                        if let Some(col) = t.column_mut(k) {
                            col.set_cell_alignment(comfy_table::CellAlignment::Right);
                        }
                    }
                }
                writeln!(self.out, "{t}")?;
            }
            _ => {}
        }
        self.out.flush()?;
        Ok(self.out)
    }
}
