//! `strobe avail --counters` and `--metrics`: what can be counted here and
//! the derived metrics defined (built in and from STROBE_METRICS).
//!
//! Owns the two listings (table or JSON). Never opens a counter itself:
//! availability comes probed from strobe-metrics' catalog.

use anyhow::Result;
use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use strobe_metrics::catalog;
use strobe_metrics::defs::{Definition, MetricSet};

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    t
}

/// Every counter the catalog names, probed; tracepoints summarized.
pub fn print_counters(json: bool) -> Result<()> {
    let all = catalog::catalog();
    let tracepoints = catalog::catalog_tracepoints();
    if json {
        let rows: Vec<_> = all
            .iter()
            .map(|c| {
                serde_json::json!({
                    "name": c.name,
                    "kind": c.kind.as_str(),
                    "unit": c.unit,
                    "description": c.description,
                    "available": c.available.is_ok(),
                    "why_not": c.available.as_ref().err(),
                })
            })
            .collect();
        let tp = match &tracepoints {
            Ok(t) => serde_json::json!({ "count": t.len(), "names": t }),
            Err(e) => serde_json::json!({ "count": 0, "why_not": e.to_string() }),
        };
        let doc = serde_json::json!({ "counters": rows, "tracepoints": tp });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    let mut t = table(&["counter", "kind", "unit", "here", "description"]);
    for c in &all {
        let here = match &c.available {
            Ok(()) => "yes".to_string(),
            Err(why) => format!("no: {why}"),
        };
        t.add_row(vec![
            c.name.clone(),
            c.kind.as_str().to_string(),
            c.unit.clone(),
            here,
            c.description.clone(),
        ]);
    }
    println!("{t}");
    let usable = all.iter().filter(|c| c.available.is_ok()).count();
    println!("{usable} of {} counters can be counted here.", all.len());
    match tracepoints {
        Ok(t) => println!(
            "{} tracepoints can be counted as `subsystem:name` (e.g. sched:sched_switch); `strobe avail --counters --json` lists them.",
            t.len()
        ),
        Err(e) => println!("tracepoints: {e}"),
    }
    println!("Raw PMU events: `pmu/event=0x..,umask=0x../` or `rXXXX`; see docs/metrics.md.");
    Ok(())
}

/// Every derived metric and defined counter: built in, then STROBE_METRICS.
pub fn print_metrics(json: bool) -> Result<()> {
    let set = MetricSet::from_env()?;
    let rows: Vec<(String, String, String, String)> = set
        .definitions()
        .map(|d| {
            let what = match d {
                Definition::Metric(m) => m.expr_text.clone(),
                Definition::Counter(c) => c.spec(),
            };
            (
                d.name().to_string(),
                what,
                d.unit().unwrap_or("").to_string(),
                d.description().unwrap_or("").to_string(),
            )
        })
        .collect();
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|(n, e, u, d)| serde_json::json!({"name": n, "definition": e, "unit": u, "description": d}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let mut t = table(&["metric", "definition", "unit", "description"]);
    for (n, e, u, d) in rows {
        t.add_row(vec![n, e, u, d]);
    }
    println!("{t}");
    Ok(())
}
