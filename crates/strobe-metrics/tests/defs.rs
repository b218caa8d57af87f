//! Tests of metric definition files (`strobe_metrics::defs`): the seed's
//! XML example, TOML and XML errors at exact positions, merging and the
//! `STROBE_METRICS` override, cycle detection, planning and evaluation,
//! and the built-in set.

use std::ffi::OsStr;
use std::io::Write;

use strobe_metrics::defs::{
    archs_from_cpuinfo, is_numeric_event, Counter, Definition, DefsError, MetricSet,
};

/// The XML example of seed 003, verbatim.
const SEED_XML: &str = "<gfx8>
\t<metric name=L1_CYCLES_COUNTER block=L1 event=0 >
\t<metric name=L1_MISS_COUNTER block=L1 event=33 >
\t. . .
</gfx8>

<gfx9>
\t. . .
</gfx9>

<global>
\t<metric name=L1_MISS_RATIO expr=L1_CYCLES_COUNT/ L1_MISS_COUNTER ></metric>
</global>
";

fn xml_err(text: &str) -> (usize, usize, String) {
    match MetricSet::parse_xml(text, "m.xml", &["x86_64"]) {
        Ok(_) => panic!("{text:?} parsed"),
        Err(DefsError::Syntax {
            origin,
            line,
            column,
            message,
        }) => {
            assert_eq!(origin, "m.xml");
            (line, column, message)
        }
        Err(e) => panic!("{text:?}: not a syntax error: {e}"),
    }
}

fn toml_err(text: &str) -> (usize, usize, String) {
    match MetricSet::parse_toml(text, "m.toml") {
        Ok(_) => panic!("{text:?} parsed"),
        Err(e @ DefsError::Syntax { .. }) => {
            let shown = e.to_string();
            let DefsError::Syntax {
                origin,
                line,
                column,
                message,
            } = e
            else {
                unreachable!()
            };
            assert_eq!(origin, "m.toml");
            assert!(
                shown.starts_with(&format!("m.toml:{line}:{column}: ")),
                "{shown}"
            );
            (line, column, message)
        }
        Err(e) => panic!("{text:?}: not a syntax error: {e}"),
    }
}

fn assert_at(got: (usize, usize, String), line: usize, column: usize, needle: &str) {
    assert_eq!(
        (got.0, got.1),
        (line, column),
        "position of error {:?}",
        got.2
    );
    assert!(
        got.2.contains(needle),
        "message {:?} lacks {needle:?}",
        got.2
    );
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= 1e-9 * b.abs().max(1.0))
}

// ------------------------------------------------------------------ XML

#[test]
fn seed_xml_parses_for_gfx8() {
    let set = MetricSet::parse_xml(SEED_XML, "seed.xml", &["gfx8"]).unwrap();
    let names: Vec<&str> = set.definitions().map(Definition::name).collect();
    assert_eq!(
        names,
        ["L1_CYCLES_COUNTER", "L1_MISS_COUNTER", "L1_MISS_RATIO"]
    );

    let c = set.counter("L1_MISS_COUNTER").unwrap();
    assert_eq!((c.block.as_str(), c.event.as_str()), ("L1", "33"));
    assert_eq!(c.spec(), "L1/event=33/");
    assert_eq!(c.defined_at, "seed.xml:3:2");
    assert_eq!(
        set.counter("L1_CYCLES_COUNTER").unwrap().spec(),
        "L1/event=0/"
    );

    let m = set.metric("L1_MISS_RATIO").unwrap();
    assert_eq!(m.expr_text, "L1_CYCLES_COUNT/ L1_MISS_COUNTER");
    assert_eq!(m.expr.names(), ["L1_CYCLES_COUNT", "L1_MISS_COUNTER"]);

    // The seed's expression names L1_CYCLES_COUNT (not ..._COUNTER): it
    // is taken as a catalog event name.
    let plan = set.plan(&["L1_MISS_RATIO"]).unwrap();
    assert_eq!(plan.counters(), ["L1_CYCLES_COUNT", "L1/event=33/"]);
    let mut out = [None];
    plan.evaluate(&[Some(50.0), Some(200.0)], &mut out);
    assert_eq!(out, [Some(0.25)]);
}

#[test]
fn seed_xml_sections_follow_the_architectures() {
    let gfx9 = MetricSet::parse_xml(SEED_XML, "seed.xml", &["gfx9"]).unwrap();
    let names: Vec<&str> = gfx9.definitions().map(Definition::name).collect();
    assert_eq!(names, ["L1_MISS_RATIO"]);
    let none = MetricSet::parse_xml(SEED_XML, "seed.xml", &[]).unwrap();
    assert_eq!(none.len(), 1, "<global> always applies");
    let upper = MetricSet::parse_xml(SEED_XML, "seed.xml", &["GFX8"]).unwrap();
    assert_eq!(upper.len(), 3, "architecture names ignore ASCII case");
}

#[test]
fn xml_forms() {
    let text = r#"<?xml version="1.0"?>
<!-- a comment with <metric name=NOT_ME event=1> inside -->
<global>
  <metric name="IPC2" expr="instructions / cycles" descr='per "cycle" &amp; more' unit=ratio/>
  <metric
      name=WRAPPED
      expr=if_nonzero(cycles, instructions / cycles, 0)
      unit=ratio
  ></metric>
  <metric name=SPACED expr = a + b description=two words here unit=u >
  <metric name=NAMED block=cpu event=cycles >
  <metric name=HEX block=cpu event=0x3C >
  <metric name=PLAIN event=task-clock />
  <metric name=OVERRIDDEN expr=1 >
</global>
<x86_64 note="ignored attribute">
  <metric name=OVERRIDDEN expr=2 ></metric>
</x86_64>
<aarch64>
  <metric name=OVERRIDDEN expr=3 ></metric>
</aarch64>
"#;
    let set = MetricSet::parse_xml(text, "f.xml", &["x86_64"]).unwrap();
    assert!(set.get("NOT_ME").is_none());
    let ipc = set.metric("IPC2").unwrap();
    assert_eq!(ipc.description.as_deref(), Some("per \"cycle\" & more"));
    assert_eq!(ipc.unit.as_deref(), Some("ratio"));
    let w = set.metric("WRAPPED").unwrap();
    assert_eq!(w.expr_text, "if_nonzero(cycles, instructions / cycles, 0)");
    assert_eq!(w.unit.as_deref(), Some("ratio"));
    let s = set.metric("SPACED").unwrap();
    assert_eq!(s.expr_text, "a + b");
    assert_eq!(s.description.as_deref(), Some("two words here"));
    assert_eq!(s.unit.as_deref(), Some("u"));
    assert_eq!(set.counter("NAMED").unwrap().spec(), "cpu/cycles/");
    assert_eq!(set.counter("HEX").unwrap().spec(), "cpu/event=0x3C/");
    assert_eq!(set.counter("PLAIN").unwrap().spec(), "task-clock");
    // The later applicable section wins; the place in the order is kept.
    let o = set.metric("OVERRIDDEN").unwrap();
    assert_eq!(o.expr_text, "2");
    assert_eq!(o.defined_at, "f.xml:17:3");
    assert_eq!(set.definitions().last().unwrap().name(), "OVERRIDDEN");
}

#[test]
fn xml_errors_at_known_positions() {
    assert_at(
        xml_err("<global>\n  <metric name=A exp=x/y ></metric>\n</global>\n"),
        2,
        18,
        "unknown attribute `exp`",
    );
    assert_at(
        xml_err("<global>\n  <metric name=R expr=A / * B ></metric>\n</global>\n"),
        2,
        27,
        "in the expression of metric `R`: expected a number, a name, a function call or '(', found '*'",
    );
    assert_at(
        xml_err("<global>\n<metric name=\"R2\"\n        expr=\"a +\n  b @ c\"/>\n</global>\n"),
        4,
        5,
        "unexpected character '@'",
    );
    // Entities make the file differ from the expression: the error points
    // at the value and says where in the expression.
    assert_at(
        xml_err("<global>\n<metric name=E expr=\"a &amp; b\">\n</global>\n"),
        2,
        22,
        "at line 1, column 3 of the expression",
    );
    assert_at(
        xml_err("<global>\n  <metric name=A event=cycles>\n"),
        1,
        1,
        "section <global> is never closed; add </global>",
    );
    assert_at(
        xml_err("<gfx9>\n</gfx8>\n"),
        2,
        1,
        "does not close the open section <gfx9>",
    );
    assert_at(xml_err("\n\n  </global>"), 3, 3, "without an open <global>");
    assert_at(
        xml_err("<metric name=A event=cycles>"),
        1,
        1,
        "outside a section",
    );
    assert_at(
        xml_err("<global>\n  <metric name=A event=cycles>\n  <metric name=A event=instructions>\n</global>"),
        3,
        3,
        "defined twice in section <global> (first at line 2, column 3)",
    );
    assert_at(
        xml_err("<global><!-- oops\n</global>"),
        1,
        9,
        "comment is never closed",
    );
    assert_at(
        xml_err("<global>\n<metric name=C event=12>\n</global>"),
        2,
        22,
        "numeric event 12 but no block",
    );
    assert_at(
        xml_err("<global>\n<metric name A>\n</global>"),
        2,
        14,
        "expected '=' after the attribute name `name`",
    );
    assert_at(
        xml_err("<global>\n<metric name=Z expr=a event=1>\n</global>"),
        2,
        23,
        "has both expr= and event=",
    );
    assert_at(
        xml_err(
            "<global>\n<metric name=A event=cycles\n<metric name=B event=instructions>\n</global>",
        ),
        3,
        1,
        "is the '>' that ends <metric> missing?",
    );
    assert_at(
        xml_err("<global>\n <metric event=cycles>\n</global>"),
        2,
        2,
        "without name=",
    );
    assert_at(
        xml_err("<global>\n <metric name=N>\n</global>"),
        2,
        2,
        "neither event=",
    );
    assert_at(
        xml_err("<global>\n <metric name=N unit=>\n</global>"),
        2,
        22,
        "expected a value after `unit=`",
    );
    assert_at(
        xml_err("<global>\n <metric name='N\n</global>"),
        2,
        15,
        "never closed; add the closing '",
    );
    assert_at(
        xml_err("<global>\n <metric name=N name=M event=1>"),
        2,
        17,
        "given twice",
    );
    assert_at(
        xml_err("<global>\n</metric>"),
        2,
        1,
        "</metric> without an open <metric",
    );
    assert_at(xml_err("<global><x86_64>"), 1, 9, "sections do not nest");
    assert_at(xml_err("<global>\n< metric>"), 2, 2, "expected a tag name");
    assert_at(
        xml_err("<global>\n<metric \"x\" name=A>"),
        2,
        9,
        "expected an attribute",
    );
    // Errors in sections of other architectures are reported too.
    assert_at(
        xml_err("<gfx8>\n<metric name=A expr=(>\n</gfx8>"),
        2,
        22,
        "found the end of the expression",
    );
}

// ----------------------------------------------------------------- TOML

#[test]
fn toml_forms() {
    let text = r#"
# counters and metrics
[[counter]]
name = "L1_MISS"
block = "cpu"
event = 60
description = "L1 data cache misses"
unit = "misses"

[[metric]]
name = "miss-rate"
expr = """
`L1_MISS` /
  cycles"""
descr = "misses per cycle"

[[counter]]
name = "LOADS"
block = "cpu"
event = "mem-loads"
"#;
    let set = MetricSet::parse_toml(text, "t.toml").unwrap();
    let names: Vec<&str> = set.definitions().map(Definition::name).collect();
    assert_eq!(names, ["L1_MISS", "miss-rate", "LOADS"], "file order");
    let c = set.counter("L1_MISS").unwrap();
    assert_eq!(c.spec(), "cpu/event=60/");
    assert_eq!(c.unit.as_deref(), Some("misses"));
    assert_eq!(c.defined_at, "t.toml:4:8");
    let m = set.metric("miss-rate").unwrap();
    assert_eq!(m.description.as_deref(), Some("misses per cycle"));
    assert_eq!(m.expr.names(), ["L1_MISS", "cycles"]);
    assert_eq!(set.counter("LOADS").unwrap().spec(), "cpu/mem-loads/");
    assert_eq!(set.counters().count(), 2);
    assert_eq!(set.metrics().count(), 1);
}

#[test]
fn toml_errors_at_known_positions() {
    assert_at(
        toml_err("[[metric]]\nname = \"A\"\nexpr = \"a\" b\n"),
        3,
        12,
        "invalid TOML",
    );
    assert_at(
        toml_err("[[metric]]\nname = \"A\"\nexp = \"a / b\"\n"),
        3,
        1,
        "unknown field `exp`",
    );
    assert_at(
        toml_err("[[metrics]]\nname = \"A\"\n"),
        1,
        3,
        "unknown field `metrics`",
    );
    assert_at(
        toml_err("[[metric]]\nname = 5\nexpr = \"a\"\n"),
        2,
        8,
        "invalid type",
    );
    assert_at(
        toml_err("[[metric]]\nname = \"A\"\nexpr = \"a / (b + )\"\n"),
        3,
        18,
        "in the expression of metric `A`: expected a number, a name, a function call or '(', found ')'",
    );
    assert_at(
        toml_err("[[metric]]\nname = \"M\"\nexpr = \"\"\"\na +\n  * b\"\"\"\n"),
        5,
        3,
        "found '*'",
    );
    assert_at(
        toml_err("[[metric]]\nname = 'L'\nexpr = '''a\n+ (b'''\n"),
        4,
        5,
        "expected ')' to close the '(' at line 4, column 3",
    );
    // An escape makes positions differ: the error points at the string.
    assert_at(
        toml_err("[[metric]]\nname = \"E\"\nexpr = \"a \\u002b * b\"\n"),
        3,
        8,
        "at line 1, column 5 of the expression",
    );
    assert_at(
        toml_err("[[metric]]\nname = \"A\"\nexpr = \"1\"\n\n[[counter]]\nname = \"A\"\nevent = \"cycles\"\n"),
        6,
        8,
        "`A` is defined twice in this file (first at line 2, column 8)",
    );
    assert_at(
        toml_err("[[counter]]\nname = \"C\"\nevent = -1\n"),
        3,
        9,
        "non-negative number",
    );
    assert_at(
        toml_err("[[counter]]\nname = \"C\"\nevent = 33\n"),
        3,
        9,
        "no block",
    );
    assert_at(
        toml_err("[[counter]]\nname = \"C\"\nevent = \" \"\n"),
        3,
        9,
        "empty event",
    );
    assert_at(
        toml_err("[[counter]]\nname = \"a`b\"\nevent = \"x\"\n"),
        2,
        8,
        "contains '`'",
    );
    assert_at(
        toml_err("\n[[metric]]\nname = \" \"\nexpr = \"1\"\n"),
        3,
        8,
        "empty name",
    );
}

// ------------------------------------------------------------- planning

const PLAN_DEFS: &str = r#"
[[counter]]
name = "L1_MISS"
block = "cpu"
event = "0x3c"

[[counter]]
name = "LOADS"
block = "cpu"
event = "mem-loads"

[[counter]]
name = "CYC"
event = "cycles"

[[metric]]
name = "miss-per-load"
expr = "L1_MISS / LOADS"
unit = "ratio"

[[metric]]
name = "miss-per-kcycle"
expr = "`miss-per-load` * LOADS / CYC * 1000"
description = "L1 misses per thousand cycles"
"#;

#[test]
fn plan_and_evaluate() {
    let mut set = MetricSet::builtin();
    set.merge(MetricSet::parse_toml(PLAN_DEFS, "p.toml").unwrap());
    let plan = set
        .plan(&[
            "IPC",
            "cycles",
            "miss-per-kcycle",
            "task-clock",
            "L1_MISS",
            "cpu-utilisation",
        ])
        .unwrap();
    assert_eq!(
        plan.counters(),
        [
            "instructions",
            "cycles",
            "cpu/event=0x3c/",
            "cpu/mem-loads/",
            "task-clock",
            "duration_time"
        ]
    );
    assert_eq!(
        plan.outputs(),
        [
            "IPC",
            "cycles",
            "miss-per-kcycle",
            "task-clock",
            "L1_MISS",
            "cpu-utilisation"
        ]
    );
    assert_eq!(plan.len(), 6);
    assert_eq!(plan.unit(0), Some("instructions/cycle"));
    assert_eq!(plan.unit(1), None);
    assert_eq!(plan.unit(5), Some("CPUs"));
    assert_eq!(plan.unit(99), None);
    assert_eq!(plan.description(2), Some("L1 misses per thousand cycles"));
    assert!(plan.is_derived(0) && !plan.is_derived(1) && plan.is_derived(2) && !plan.is_derived(4));

    let values = [
        Some(3e9),
        Some(2e9),
        Some(1e6),
        Some(4e6),
        Some(1.5e9),
        Some(1e9),
    ];
    let mut out = [None; 6];
    plan.evaluate(&values, &mut out);
    assert_eq!(out[0], Some(1.5));
    assert_eq!(out[1], Some(2e9));
    assert!(close(out[2], 0.5), "{:?}", out[2]);
    assert_eq!(out[3], Some(1.5e9));
    assert_eq!(out[4], Some(1e6));
    assert_eq!(out[5], Some(1.5));

    // Missing counters and division by zero give missing values.
    let values = [Some(3e9), Some(0.0), None, Some(4e6), Some(f64::INFINITY)];
    plan.evaluate(&values, &mut out);
    assert_eq!(out, [None, Some(0.0), None, None, None, None]);

    // A short output slice is filled as far as it goes.
    let mut short = [Some(-1.0); 2];
    plan.evaluate(&[Some(4.0), Some(2.0)], &mut short);
    assert_eq!(short, [Some(2.0), Some(2.0)]);
}

#[test]
fn plan_shares_counters_and_requests_pass_through() {
    let set = MetricSet::builtin();
    let plan = set
        .plan(&["CPI", "IPC", "instructions", "cpu/cycles/"])
        .unwrap();
    assert_eq!(plan.counters(), ["cycles", "instructions", "cpu/cycles/"]);
    let mut out = [None; 4];
    plan.evaluate(&[Some(4.0), Some(2.0), Some(7.0)], &mut out);
    assert_eq!(out, [Some(2.0), Some(0.5), Some(2.0), Some(7.0)]);
    assert!(plan.is_empty() == plan.outputs().is_empty());
    assert!(set.plan(&[]).unwrap().is_empty());
    assert!(matches!(set.plan(&[""]), Err(DefsError::BadRequest { .. })));
}

const CYCLIC: &str = r#"
[[metric]]
name = "a"
expr = "b + 1"

[[metric]]
name = "b"
expr = "`c-c` * 2"

[[metric]]
name = "c-c"
expr = "min(a, 3)"

[[metric]]
name = "x"
expr = "a / 2 + fine"

[[metric]]
name = "fine"
expr = "cycles"

[[metric]]
name = "self"
expr = "self + 1"
"#;

#[test]
fn cycles_are_errors_naming_the_cycle() {
    let set = MetricSet::parse_toml(CYCLIC, "c.toml").unwrap();
    let cycle = |name: &str| match set.plan(&[name]) {
        Err(DefsError::Cycle { cycle, .. }) => cycle,
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(cycle("x"), ["a", "b", "c-c", "a"]);
    assert_eq!(cycle("b"), ["b", "c-c", "a", "b"]);
    assert_eq!(cycle("self"), ["self", "self"]);
    let message = set.plan(&["a"]).unwrap_err().to_string();
    assert!(message.contains("a -> b -> c-c -> a"), "{message}");
    assert!(message.contains("a at c.toml:3:8"), "{message}");
    // Metrics outside the cycle plan fine.
    assert_eq!(set.plan(&["fine"]).unwrap().counters(), ["cycles"]);
}

#[test]
fn diamond_dependencies_plan_once_per_counter() {
    let text = r#"
[[metric]]
name = "d0"
expr = "cycles + instructions"
"#;
    let mut set = MetricSet::parse_toml(text, "d.toml").unwrap();
    // d(k) = d(k-1) + d(k-1): doubling terms at each level.
    for k in 1..=30 {
        let more = format!(
            "[[metric]]\nname = \"d{k}\"\nexpr = \"d{} + d{}\"\n",
            k - 1,
            k - 1
        );
        set.merge(MetricSet::parse_toml(&more, "d.toml").unwrap());
    }
    let plan = set.plan(&["d5"]).unwrap();
    assert_eq!(plan.counters(), ["cycles", "instructions"]);
    let mut out = [None];
    plan.evaluate(&[Some(1.0), Some(2.0)], &mut out);
    assert_eq!(out, [Some(96.0)]);
    // Exponential expansions are refused with a clear error, not a hang.
    match set.plan(&["d30"]) {
        Err(e @ DefsError::TooComplex { .. }) => {
            assert!(e.to_string().contains("d30"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

// --------------------------------------------------------------- builtin

#[test]
fn builtin_parses_and_every_metric_plans() {
    let set = MetricSet::builtin();
    let names: Vec<&str> = set.metrics().map(|m| m.name.as_str()).collect();
    for expected in [
        "IPC",
        "CPI",
        "cache-miss-ratio",
        "branch-miss-ratio",
        "frontend-bound",
        "backend-bound",
        "cpu-utilisation",
        "faults/s",
        "major-faults/s",
        "context-switches/s",
        "cpu-migrations/s",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    for m in set.metrics() {
        let plan = set
            .plan(&[&m.name])
            .unwrap_or_else(|e| panic!("{}: {e}", m.name));
        assert!(!plan.counters().is_empty());
        assert!(
            m.unit.is_some() && m.description.is_some(),
            "{} lacks unit or description",
            m.name
        );
    }
    let all = set.plan(&names).unwrap();
    for spec in all.counters() {
        assert!(
            [
                "cycles",
                "instructions",
                "cache-references",
                "cache-misses",
                "branches",
                "branch-misses",
                "stalled-cycles-frontend",
                "stalled-cycles-backend",
                "task-clock",
                "page-faults",
                "major-faults",
                "minor-faults",
                "context-switches",
                "cpu-migrations",
                "duration_time",
            ]
            .contains(&spec.as_str()),
            "unexpected counter {spec}"
        );
    }
}

#[test]
fn builtin_values() {
    let set = MetricSet::builtin();
    let plan = set
        .plan(&[
            "cache-miss-ratio",
            "faults/s",
            "cpu-utilisation",
            "backend-bound",
        ])
        .unwrap();
    assert_eq!(
        plan.counters(),
        [
            "cache-misses",
            "cache-references",
            "page-faults",
            "duration_time",
            "task-clock",
            "stalled-cycles-backend",
            "cycles"
        ]
    );
    let mut out = [None; 4];
    plan.evaluate(
        &[
            Some(25.0),
            Some(100.0),
            Some(500.0),
            Some(0.5e9),
            Some(2e9),
            Some(30.0),
            Some(120.0),
        ],
        &mut out,
    );
    assert_eq!(
        [out[0], out[2], out[3]],
        [Some(0.25), Some(4.0), Some(0.25)]
    );
    assert!(close(out[1], 1000.0), "{:?}", out[1]);
}

// ------------------------------------------------- merging and the env

#[test]
fn merge_overrides_by_name_in_place() {
    let mut set = MetricSet::builtin();
    let before: Vec<String> = set.definitions().map(|d| d.name().to_string()).collect();
    let over = "[[metric]]\nname = \"CPI\"\nexpr = \"cycles / instructions * 2\"\n\n\
                [[counter]]\nname = \"IPC\"\nblock = \"cpu\"\nevent = \"instructions\"\n\n\
                [[metric]]\nname = \"new\"\nexpr = \"1\"\n";
    set.merge(MetricSet::parse_toml(over, "o.toml").unwrap());
    let after: Vec<String> = set.definitions().map(|d| d.name().to_string()).collect();
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(after.last().map(String::as_str), Some("new"));
    assert_eq!(
        set.metric("CPI").unwrap().expr_text,
        "cycles / instructions * 2"
    );
    assert_eq!(
        set.counter("IPC").unwrap().spec(),
        "cpu/instructions/",
        "a counter may replace a metric"
    );
    assert!(set.metric("IPC").is_none());
}

fn write_temp(suffix: &str, text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(suffix).tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

#[test]
fn strobe_metrics_value_overrides_builtin() {
    let f = write_temp(
        ".toml",
        "[[metric]]\nname = \"IPC\"\nexpr = \"instructions / cycles * 100\"\nunit = \"%\"\n",
    );
    let set = MetricSet::from_env_value(Some(f.path().as_os_str())).unwrap();
    assert_eq!(set.metric("IPC").unwrap().unit.as_deref(), Some("%"));
    assert!(
        set.metric("CPI").is_some(),
        "the rest of the built-in set stays"
    );
    assert_eq!(set.len(), MetricSet::builtin().len());

    // XML files work too (their <global> section at least).
    let x = write_temp(
        ".xml",
        "# comment line\n<global>\n<metric name=Z expr=IPC*2 ></metric>\n</global>\n",
    );
    let set = MetricSet::from_env_value(Some(x.path().as_os_str())).unwrap();
    let plan = set.plan(&["Z"]).unwrap();
    let mut out = [None];
    plan.evaluate(&[Some(6.0), Some(3.0)], &mut out);
    assert_eq!(out, [Some(4.0)]);

    // Unset or empty: the built-in set.
    assert_eq!(
        MetricSet::from_env_value(None).unwrap().len(),
        MetricSet::builtin().len()
    );
    assert_eq!(
        MetricSet::from_env_value(Some(OsStr::new("")))
            .unwrap()
            .len(),
        MetricSet::builtin().len()
    );

    // Set but unreadable: an error saying what to do.
    let err = MetricSet::from_env_value(Some(OsStr::new("/nonexistent/strobe-metrics.toml")))
        .unwrap_err();
    assert!(matches!(err, DefsError::Io { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("/nonexistent/strobe-metrics.toml"),
        "{message}"
    );
    assert!(message.contains("STROBE_METRICS"), "{message}");

    // Set to a malformed file: the file's error, with its path.
    let bad = write_temp(".toml", "[[metric]]\nname = \"B\"\nexpr = \"1 +\"\n");
    let err = MetricSet::from_env_value(Some(bad.path().as_os_str())).unwrap_err();
    assert_eq!(err.position(), Some((3, 12)));
    assert!(
        err.to_string()
            .starts_with(&bad.path().display().to_string()),
        "{err}"
    );
}

/// Runs `from_env` in a child process (this test binary, filtered to
/// this test) so the environment of other tests is never touched.
#[test]
fn from_env_reads_strobe_metrics_in_a_child_process() {
    const CHILD: &str = "STROBE_METRICS_TEST_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let set = MetricSet::from_env().unwrap();
        assert_eq!(set.metric("IPC").unwrap().expr_text, "1 + 1");
        return;
    }
    let f = write_temp(".toml", "[[metric]]\nname = \"IPC\"\nexpr = \"1 + 1\"\n");
    let exe = std::env::current_exe().unwrap();
    let run = |path: &OsStr| {
        std::process::Command::new(&exe)
            .args([
                "--exact",
                "from_env_reads_strobe_metrics_in_a_child_process",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .env("STROBE_METRICS", path)
            .output()
            .unwrap()
    };
    let ok = run(f.path().as_os_str());
    assert!(
        ok.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&ok.stdout)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("1 passed"));
    let bad = run(OsStr::new("/nonexistent/m.toml"));
    assert!(
        !bad.status.success(),
        "an unreadable STROBE_METRICS must fail"
    );
}

#[test]
fn load_detects_the_format() {
    let t = write_temp(".conf", "# TOML\n[[metric]]\nname = \"T\"\nexpr = \"1\"\n");
    assert!(MetricSet::load(t.path()).unwrap().metric("T").is_some());
    let x = write_temp(
        ".conf",
        "\n<!-- XML -->\n<global><metric name=X expr=2></metric></global>\n",
    );
    assert!(MetricSet::load(x.path()).unwrap().metric("X").is_some());
    let archs = MetricSet::load_with_archs(
        write_temp(".xml", "<zen4><metric name=Z block=cpu event=0x76></zen4>").path(),
        &["zen4"],
    )
    .unwrap();
    assert_eq!(archs.counter("Z").unwrap().spec(), "cpu/event=0x76/");
    let err = MetricSet::load(std::path::Path::new("/nonexistent/x.xml")).unwrap_err();
    assert!(matches!(err, DefsError::Io { .. }));
    let bin = write_temp(".toml", "");
    std::fs::write(bin.path(), b"[[metric]]\nname = \"\xff\"\n").unwrap();
    let err = MetricSet::load(bin.path()).unwrap_err();
    assert_eq!(err.position(), Some((2, 9)));
    assert!(err.to_string().contains("not UTF-8"), "{err}");
}

// ------------------------------------------------------ counters, archs

#[test]
fn counter_specs() {
    let c = |block: &str, event: &str| Counter {
        name: "c".into(),
        block: block.into(),
        event: event.into(),
        description: None,
        unit: None,
        defined_at: String::new(),
    };
    assert_eq!(c("", "task-clock").spec(), "task-clock");
    assert_eq!(c("cpu", "33").spec(), "cpu/event=33/");
    assert_eq!(c("cpu", "0x3c").spec(), "cpu/event=0x3c/");
    assert_eq!(c("cpu", "cycles").spec(), "cpu/cycles/");
    assert_eq!(c("L1", "0").spec(), "L1/event=0/");
    assert_eq!(c("cpu", "0x").spec(), "cpu/0x/");
    assert!(is_numeric_event("0XfF") && is_numeric_event("7"));
    assert!(!is_numeric_event("") && !is_numeric_event("0x") && !is_numeric_event("1a"));
}

#[test]
fn architecture_names() {
    let amd = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n\nprocessor\t: 1\n";
    assert_eq!(
        archs_from_cpuinfo("x86_64", amd),
        ["x86_64", "amd64", "amd", "zen", "zen4"]
    );
    let zen3 = "vendor_id : AuthenticAMD\ncpu family : 25\nmodel : 1\n";
    assert_eq!(
        archs_from_cpuinfo("x86_64", zen3),
        ["x86_64", "amd64", "amd", "zen", "zen3"]
    );
    let zen2 = "vendor_id : AuthenticAMD\ncpu family : 23\nmodel : 49\n";
    assert!(archs_from_cpuinfo("x86_64", zen2).contains(&"zen2".to_string()));
    let intel = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n";
    assert_eq!(
        archs_from_cpuinfo("x86_64", intel),
        ["x86_64", "amd64", "intel"]
    );
    assert_eq!(
        archs_from_cpuinfo("aarch64", "CPU implementer\t: 0x41\n"),
        ["aarch64", "arm64"]
    );
    assert_eq!(archs_from_cpuinfo("riscv64", ""), ["riscv64"]);
    let here = strobe_metrics::defs::machine_archs();
    assert_eq!(here[0], std::env::consts::ARCH);
}

// ------------------------------------------------------------ properties

fn xml_soup() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let piece = prop_oneof![
        Just("<global>"),
        Just("</global>"),
        Just("<x86_64>"),
        Just("</x86_64>"),
        Just("<metric"),
        Just("</metric>"),
        Just(" name="),
        Just(" expr="),
        Just(" block="),
        Just(" event="),
        Just(" descr="),
        Just(" unit="),
        Just("A"),
        Just("B1"),
        Just("0x3c"),
        Just("12"),
        Just("a / b"),
        Just("`c-d`"),
        Just("("),
        Just(")"),
        Just(">"),
        Just("/>"),
        Just("\""),
        Just("'"),
        Just(" "),
        Just("\n"),
        Just("<!--"),
        Just("-->"),
        Just("&amp;"),
        Just("&#x41;"),
        Just("&#99999999;"),
        Just("&"),
        Just("<?"),
        Just("?>"),
        Just("<!x>"),
        Just("é"),
        Just("="),
        Just("<"),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|p| p.concat())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1500))]

    #[test]
    fn xml_parser_never_panics(text in xml_soup()) {
        if let Err(e) = MetricSet::parse_xml(&text, "p.xml", &["x86_64"]) {
            let (line, column) = e.position().expect("syntax errors carry a position");
            proptest::prop_assert!(line >= 1 && column >= 1);
        }
    }

    #[test]
    fn any_text_never_panics(text in ".{0,120}") {
        let _ = MetricSet::parse(&text, "p", &["x86_64"]);
        let _ = MetricSet::parse_xml(&text, "p", &[]);
        let _ = MetricSet::parse_toml(&text, "p");
    }

    #[test]
    fn toml_with_arbitrary_expressions_never_panics(expr in ".{0,60}") {
        let text = format!("[[metric]]\nname = \"m\"\nexpr = '''{expr}'''\n");
        let _ = MetricSet::parse_toml(&text, "p.toml");
        let text = format!("<global><metric name=m expr=\"{expr}\"></global>");
        let _ = MetricSet::parse_xml(&text, "p.xml", &[]);
    }
}
