//! Measures how fast compiled derived-metric expressions evaluate.
//!
//! Prints evaluations per second for a few typical metrics; asserts
//! nothing. Run with
//! `cargo run --release -p strobe-metrics --example expr_speed`.

use std::hint::black_box;
use std::time::Instant;

use strobe_metrics::defs::MetricSet;
use strobe_metrics::expr;

fn main() {
    let slots = [
        "instructions",
        "cycles",
        "page-faults",
        "duration_time",
        "x",
    ];
    let cases = [
        "instructions / cycles",
        "`page-faults` / duration_time * 1e9",
        "if_nonzero(cycles, instructions / cycles, 0) + max(x, 1, 2) - min(x, 3)",
        "sum(instructions, cycles, x, 1) / (duration_time - x * 2)",
    ];
    const N: usize = 20_000_000;
    for text in cases {
        let program = expr::parse(text)
            .expect("valid expression")
            .compile_with_slots(&slots)
            .expect("all names have slots");
        let mut values = [
            Some(1.5e9),
            Some(1.0e9),
            Some(1234.0),
            Some(2.0e9),
            Some(7.0),
        ];
        let start = Instant::now();
        let mut acc = 0.0;
        for i in 0..N {
            values[4] = Some(i as f64);
            acc += program.eval(black_box(&values)).unwrap_or(0.0);
        }
        let secs = start.elapsed().as_secs_f64();
        black_box(acc);
        println!(
            "{:>7.1} M evaluations/s  ({:>5.2} ns each, {} ops)  {text}",
            N as f64 / secs / 1e6,
            secs / N as f64 * 1e9,
            program.len()
        );
    }

    // A whole plan: all built-in metrics over their counters.
    let set = MetricSet::builtin();
    let names: Vec<&str> = set.metrics().map(|m| m.name.as_str()).collect();
    let plan = set.plan(&names).expect("built-in metrics plan");
    let mut counters: Vec<Option<f64>> = (0..plan.counters().len())
        .map(|i| Some(1e6 + i as f64))
        .collect();
    let mut out = vec![None; plan.outputs().len()];
    const ROUNDS: usize = 2_000_000;
    let start = Instant::now();
    for i in 0..ROUNDS {
        counters[0] = Some(i as f64);
        plan.evaluate(black_box(&counters), &mut out);
        black_box(&out);
    }
    let secs = start.elapsed().as_secs_f64();
    let values = (ROUNDS * out.len()) as f64;
    println!(
        "{:>7.1} M metric values/s  (Plan::evaluate of {} built-in metrics over {} counters)",
        values / secs / 1e6,
        out.len(),
        plan.counters().len()
    );
}
