//! Tests of the derived-metric expression language (`strobe_metrics::expr`):
//! precedence, functions, missing values, error positions, nesting
//! limits, and property tests (no panics, print/reparse round trips,
//! compiled programs agree with the tree evaluator).

use proptest::prelude::*;
use strobe_metrics::expr::{self, BinOp, CompileError, Expr, Func, MAX_DEPTH};

/// Evaluates `text` with the given name values (unlisted names: missing).
fn eval(text: &str, vars: &[(&str, Option<f64>)]) -> Option<f64> {
    let e = expr::parse(text).unwrap_or_else(|err| panic!("{text:?}: {err}"));
    let tree = e.eval(&mut |n| vars.iter().find(|(k, _)| *k == n).and_then(|(_, v)| *v));
    // The compiled program must agree with the tree walk.
    let names: Vec<&str> = vars.iter().map(|(k, _)| *k).collect();
    let values: Vec<Option<f64>> = vars.iter().map(|(_, v)| *v).collect();
    let prog = e
        .compile(|n| Some(names.iter().position(|k| *k == n).unwrap_or(usize::MAX)))
        .unwrap();
    assert_eq!(prog.eval(&values), tree, "program vs tree for {text:?}");
    tree
}

fn num(text: &str) -> Option<f64> {
    eval(text, &[])
}

fn err(text: &str) -> (usize, usize, String) {
    match expr::parse(text) {
        Ok(e) => panic!("{text:?} parsed as {e:?}"),
        Err(e) => (e.line, e.column, e.message),
    }
}

fn name(n: &str) -> Box<Expr> {
    Box::new(Expr::Name(n.to_string()))
}

#[test]
fn precedence_and_associativity() {
    assert_eq!(num("1 + 2 * 3"), Some(7.0));
    assert_eq!(num("(1 + 2) * 3"), Some(9.0));
    assert_eq!(num("8 / 4 / 2"), Some(1.0));
    assert_eq!(num("8 - 4 - 2"), Some(2.0));
    assert_eq!(num("2 * 3 / 4"), Some(1.5));
    assert_eq!(num("10 - 2 * 3 + 1"), Some(5.0));
    assert_eq!(num("2 × 3 ÷ 4 − 1"), Some(0.5));
    assert_eq!(num("1.5e3 + .5 + 2.e1 + 1E-1"), Some(1520.6));
    assert_eq!(
        expr::parse("a - b - c").unwrap(),
        Expr::Binary(
            BinOp::Sub,
            Box::new(Expr::Binary(BinOp::Sub, name("a"), name("b"))),
            name("c")
        )
    );
    assert_eq!(
        expr::parse("a / b * c").unwrap(),
        Expr::Binary(
            BinOp::Mul,
            Box::new(Expr::Binary(BinOp::Div, name("a"), name("b"))),
            name("c")
        )
    );
}

#[test]
fn unary_minus() {
    assert_eq!(num("-2 * 3"), Some(-6.0));
    assert_eq!(num("- -2"), Some(2.0));
    assert_eq!(num("--2"), Some(2.0));
    assert_eq!(num("1 - -1"), Some(2.0));
    assert_eq!(num("-(1 + 2)"), Some(-3.0));
    assert_eq!(num("+3"), Some(3.0));
    assert_eq!(
        expr::parse("-a * b").unwrap(),
        Expr::Binary(BinOp::Mul, Box::new(Expr::Neg(name("a"))), name("b"))
    );
}

#[test]
fn whitespace_and_newlines() {
    assert_eq!(num("\n  1\n+\t2\r\n*  3  \n"), Some(7.0));
}

#[test]
fn functions() {
    assert_eq!(num("min(3, 1, 2)"), Some(1.0));
    assert_eq!(num("max(3, 1, 2)"), Some(3.0));
    assert_eq!(num("sum(1, 2, 3, 4)"), Some(10.0));
    assert_eq!(num("sum(5)"), Some(5.0));
    assert_eq!(num("if_nonzero(0, 1, 2)"), Some(2.0));
    assert_eq!(num("if_nonzero(-0.5, 1, 2)"), Some(1.0));
    assert_eq!(num("ifnz(7, 1, 2)"), Some(1.0));
    assert_eq!(num("min (2, max(1, 5)) * 2"), Some(4.0));
    // Function names are plain names unless followed by '('.
    assert_eq!(eval("min + 1", &[("min", Some(2.0))]), Some(3.0));
    assert_eq!(
        expr::parse("ifnz(a, b, c)").unwrap(),
        Expr::Call(
            Func::IfNonzero,
            vec![
                Expr::Name("a".into()),
                Expr::Name("b".into()),
                Expr::Name("c".into())
            ]
        )
    );
}

#[test]
fn names_plain_and_backquoted() {
    let e = expr::parse("`task-clock` / duration_time + `task-clock` * cpu.x:y_1").unwrap();
    assert_eq!(e.names(), vec!["task-clock", "duration_time", "cpu.x:y_1"]);
    let e = expr::parse("`cpu/event=0x3c/` / `cpu/cycles/`").unwrap();
    assert_eq!(e.names(), vec!["cpu/event=0x3c/", "cpu/cycles/"]);
    assert_eq!(
        eval(
            "`task-clock` / duration_time",
            &[("task-clock", Some(3.0)), ("duration_time", Some(2.0))]
        ),
        Some(1.5)
    );
    // Without backquotes a dash is minus.
    assert_eq!(
        expr::parse("task-clock").unwrap(),
        Expr::Binary(BinOp::Sub, name("task"), name("clock"))
    );
}

#[test]
fn division_by_zero_is_missing() {
    assert_eq!(num("1 / 0"), None);
    assert_eq!(num("0 / 0"), None);
    assert_eq!(num("-1 / 0"), None);
    assert_eq!(num("1 / 0 * 0"), None);
    assert_eq!(num("(1 / 0) - (1 / 0)"), None);
    assert_eq!(eval("a / b", &[("a", Some(5.0)), ("b", Some(0.0))]), None);
    assert_eq!(eval("a / b", &[("a", Some(0.0)), ("b", Some(-0.0))]), None);
    // The branch not taken does not matter.
    assert_eq!(num("if_nonzero(1, 5, 1 / 0)"), Some(5.0));
    assert_eq!(num("if_nonzero(0, 1 / 0, 6)"), Some(6.0));
    assert_eq!(num("if_nonzero(1 / 0, 1, 2)"), None);
}

#[test]
fn missing_values_propagate() {
    let vars = [("a", Some(4.0)), ("m", None)];
    assert_eq!(eval("m", &vars), None);
    assert_eq!(eval("a + m", &vars), None);
    assert_eq!(eval("m * 0", &vars), None);
    assert_eq!(eval("-m", &vars), None);
    assert_eq!(eval("min(a, m)", &vars), None);
    assert_eq!(eval("max(m, a)", &vars), None);
    assert_eq!(eval("sum(a, a, m)", &vars), None);
    assert_eq!(eval("if_nonzero(m, a, a)", &vars), None);
    assert_eq!(eval("if_nonzero(a, a, m)", &vars), Some(4.0));
    assert_eq!(eval("if_nonzero(a - a, m, a)", &vars), Some(4.0));
    // Unknown names are missing too.
    assert_eq!(eval("a + nowhere", &vars), None);
}

#[test]
fn non_finite_values_become_missing() {
    assert_eq!(num("1e308 * 10"), None);
    assert_eq!(num("min(1e308 * 10, 1)"), None);
    assert_eq!(num("1 / (1e308 * 10)"), None);
    assert_eq!(num("1e308 + 1e308 - 1e308"), None);
    assert_eq!(eval("a + 1", &[("a", Some(f64::INFINITY))]), None);
    assert_eq!(eval("a * 0", &[("a", Some(f64::NAN))]), None);
    assert_eq!(eval("min(a, 1)", &[("a", Some(f64::NEG_INFINITY))]), None);
}

#[test]
fn compiled_programs() {
    let e = expr::parse("ifnz(c, a / b, -a) + sum(a, b, 1)").unwrap();
    let p = e.compile_with_slots(&["a", "b", "c"]).unwrap();
    assert_eq!(p.slots(), 3);
    assert!(p.max_stack() <= 4, "max stack {}", p.max_stack());
    assert_eq!(p.eval(&[Some(6.0), Some(3.0), Some(1.0)]), Some(12.0));
    assert_eq!(p.eval(&[Some(6.0), Some(3.0), Some(0.0)]), Some(4.0));
    assert_eq!(
        p.eval(&[Some(6.0), Some(3.0)]),
        None,
        "short slot table: c missing"
    );
    assert_eq!(p.eval_f64(&[6.0, 3.0, 1.0]), 12.0);
    assert!(p.eval_f64(&[6.0, f64::NAN, 1.0]).is_nan());
    assert_eq!(
        e.compile_with_slots(&["a", "b"]),
        Err(CompileError::UnknownName("c".to_string()))
    );
    // A program needing a big stack still evaluates.
    let mut text = String::from("1");
    for _ in 0..100 {
        text = format!("1 + ({text})");
    }
    let p = expr::parse(&text).unwrap().compile(|_| None).unwrap();
    assert!(p.max_stack() > 16);
    assert_eq!(p.eval(&[]), Some(101.0));
}

#[test]
fn hand_built_too_deep_tree_does_not_compile() {
    let mut e = Expr::Num(1.0);
    for _ in 0..(MAX_DEPTH + 10) {
        e = Expr::Neg(Box::new(e));
    }
    assert_eq!(e.compile(|_| None), Err(CompileError::TooDeep));
}

#[test]
fn printing() {
    for (text, printed) in [
        ("a-(b-c)", "a - (b - c)"),
        ("(a-b)-c", "a - b - c"),
        ("a/(b*c)", "a / (b * c)"),
        ("-(a+b)", "-(a + b)"),
        ("- -a", "--a"),
        ("`task-clock`/ 1e9", "`task-clock` / 1000000000.0"),
        ("ifnz(x,1.5,2)", "if_nonzero(x, 1.5, 2.0)"),
        ("1e300", "1e300"),
    ] {
        let e = expr::parse(text).unwrap();
        assert_eq!(e.to_string(), printed, "printing {text:?}");
        assert_eq!(expr::parse(printed).unwrap(), e);
    }
    // Hand-built constants that the parser never makes still read back.
    let e = Expr::Binary(BinOp::Sub, name("a"), Box::new(Expr::Num(-2.0)));
    assert_eq!(e.to_string(), "a - (-2.0)");
    let back = expr::parse(&e.to_string()).unwrap();
    assert_eq!(back.eval(&mut |_| Some(1.0)), Some(3.0));
}

#[test]
fn error_positions() {
    let cases: &[(&str, usize, usize, &str)] = &[
        (
            "",
            1,
            1,
            "expected a number, a name, a function call or '(', found the end",
        ),
        ("   ", 1, 1, "found the end of the expression"),
        (
            "a + * b",
            1,
            5,
            "expected a number, a name, a function call or '(', found '*'",
        ),
        (
            "(a + b",
            1,
            7,
            "expected ')' to close the '(' at line 1, column 1",
        ),
        ("a +\n  b @ c", 2, 5, "unexpected character '@'"),
        (
            "min(a,\n  b",
            2,
            4,
            "expected ',' or ')' in the arguments of min(...)",
        ),
        ("foo(1)", 1, 1, "unknown function `foo`"),
        ("if_nonzero(a, b)", 1, 1, "takes exactly 3 arguments"),
        ("1 + min()", 1, 9, "found ')'"),
        ("a + `task-clock", 1, 5, "not closed"),
        ("a + ``", 1, 5, "empty name in backquotes"),
        ("1e + 2", 1, 3, "expected the digits of the exponent"),
        ("2x", 1, 2, "right after a number"),
        (
            "a b",
            1,
            3,
            "expected an operator (+ - * /) or the end of the expression, found the name b",
        ),
        ("a)", 1, 2, "found ')'"),
        ("1e999", 1, 1, "too large"),
        ("a × é", 1, 5, "unexpected character 'é'"),
        ("(\n(\n  a +\n  )\n)", 4, 3, "found ')'"),
        ("a,b", 1, 2, "found ','"),
    ];
    for &(text, line, column, message) in cases {
        let (l, c, m) = err(text);
        assert_eq!((l, c), (line, column), "position for {text:?} ({m})");
        assert!(
            m.contains(message),
            "message for {text:?}: {m:?} lacks {message:?}"
        );
    }
    let e = expr::parse("a +").unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 1, column 4: expected a number, a name, a function call or '(', found the end of \
         the expression"
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let ok = format!("{}x{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
    assert!(expr::parse(&ok).is_ok());

    let deep = format!("{}x{}", "(".repeat(100_000), ")".repeat(100_000));
    let (l, c, m) = err(&deep);
    assert_eq!((l, c), (1, MAX_DEPTH + 1));
    assert!(m.contains("nested more than 256 levels"), "{m}");

    let (l, c, m) = err(&format!("{}x", "-".repeat(100_000)));
    assert_eq!((l, c), (1, MAX_DEPTH + 1));
    assert!(m.contains("nested more than 256 levels"), "{m}");

    let (l, c, _) = err(&"min(".repeat(100_000));
    assert_eq!((l, c), (1, 4 * (MAX_DEPTH + 1)));

    // A long chain of + builds a deep tree: refused at the 256th '+',
    // with a hint to use sum(...).
    let chain = format!("x{}", "+x".repeat(100_000));
    let (l, c, m) = err(&chain);
    assert_eq!((l, c), (1, 2 * MAX_DEPTH));
    assert!(m.contains("sum("), "{m}");
    let chain = format!("x{}", "+x".repeat(MAX_DEPTH - 1));
    assert!(expr::parse(&chain).is_ok());

    // sum(...) with many arguments is shallow.
    let args = vec!["1"; 10_000].join(",");
    assert_eq!(num(&format!("sum({args})")), Some(10_000.0));
}

// ------------------------------------------------------------ properties

fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("cycles".to_string()),
        Just("task-clock".to_string()),
        Just("min".to_string()),
        Just("cpu/event=0x3c/".to_string()),
        "[A-Za-z_][A-Za-z0-9_.:]{0,6}",
        "[a-z][a-z -/]{0,6}",
    ]
}

fn arb_expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        (0u32..1000).prop_map(|n| Expr::Num(f64::from(n))),
        (0.0f64..1e12).prop_map(Expr::Num),
        prop_oneof![Just(0.0), Just(1e-300), Just(1e300), Just(0.1)].prop_map(Expr::Num),
        arb_name().prop_map(Expr::Name),
    ];
    leaf.prop_recursive(6, 64, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| Expr::Neg(Box::new(e))),
            (
                prop_oneof![
                    Just(BinOp::Add),
                    Just(BinOp::Sub),
                    Just(BinOp::Mul),
                    Just(BinOp::Div)
                ],
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(op, l, r)| Expr::Binary(op, Box::new(l), Box::new(r))),
            (
                prop_oneof![Just(Func::Min), Just(Func::Max), Just(Func::Sum)],
                prop::collection::vec(inner.clone(), 1..4)
            )
                .prop_map(|(f, args)| Expr::Call(f, args)),
            prop::collection::vec(inner, 3..=3).prop_map(|args| Expr::Call(Func::IfNonzero, args)),
        ]
    })
}

fn value_of(name: &str, salt: u64) -> Option<f64> {
    // A deterministic mix of ordinary, zero and missing values.
    let h = name.bytes().fold(salt ^ 0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    match h % 7 {
        0 => None,
        1 => Some(0.0),
        n => Some((h >> 11) as f64 / 1e6 * if n % 2 == 0 { 1.0 } else { -1.0 }),
    }
}

fn token_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("a"),
        Just("`x-y`"),
        Just("1"),
        Just("2.5e3"),
        Just("+"),
        Just("-"),
        Just("*"),
        Just("/"),
        Just("("),
        Just(")"),
        Just(","),
        Just("min"),
        Just("ifnz"),
        Just("sum"),
        Just(" "),
        Just("\n"),
        Just("×"),
        Just("`"),
        Just("."),
        Just("e"),
    ];
    prop::collection::vec(token, 0..40).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,80}") {
        if let Ok(e) = expr::parse(&text) {
            let printed = e.to_string();
            prop_assert_eq!(expr::parse(&printed), Ok(e.clone()), "printed {:?}", printed);
        }
    }

    #[test]
    fn token_soup_never_panics(text in token_soup()) {
        match expr::parse(&text) {
            Ok(e) => {
                let printed = e.to_string();
                prop_assert_eq!(expr::parse(&printed), Ok(e.clone()), "printed {:?}", printed);
                let names = e.names();
                let p = e.compile(|n| names.iter().position(|k| *k == n)).unwrap();
                let values: Vec<Option<f64>> = names.iter().map(|n| value_of(n, 1)).collect();
                prop_assert_eq!(p.eval(&values), e.eval(&mut |n| value_of(n, 1)));
            }
            Err(err) => {
                prop_assert!(err.line >= 1 && err.column >= 1);
                prop_assert!(!err.message.is_empty());
            }
        }
    }

    #[test]
    fn printed_then_reparsed_evaluates_equal(e in arb_expr(), salt in any::<u64>()) {
        let printed = e.to_string();
        let back = expr::parse(&printed);
        prop_assert!(back.is_ok(), "{:?} does not parse: {:?}", printed, back);
        let back = back.unwrap();
        prop_assert_eq!(&back, &e, "printed {:?}", printed);
        let v1 = e.eval(&mut |n| value_of(n, salt));
        let v2 = back.eval(&mut |n| value_of(n, salt));
        prop_assert_eq!(v1, v2);
        prop_assert!(v1.is_none_or(f64::is_finite));
        // The compiled program computes the same value.
        let names = back.names();
        let p = back.compile(|n| names.iter().position(|k| *k == n)).unwrap();
        let values: Vec<Option<f64>> = names.iter().map(|n| value_of(n, salt)).collect();
        prop_assert_eq!(p.eval(&values), v1);
    }
}

#[test]
fn deepest_accepted_tree_works_on_a_small_stack() {
    // The tallest tree the parser accepts, handled on a 512 KiB thread
    // (debug builds included): parse, print, reparse, compare, compile,
    // evaluate both ways, clone and drop.
    let worker = std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(|| {
            let text = format!("{}x{}", "-(1+".repeat(127), ")".repeat(127));
            let e = expr::parse(&text).unwrap();
            let again = expr::parse(&e.to_string()).unwrap();
            assert_eq!(again, e.clone());
            let p = e.compile_with_slots(&["x"]).unwrap();
            let tree = e.eval(&mut |_| Some(2.0));
            assert_eq!(p.eval(&[Some(2.0)]), tree);
            tree
        })
        .unwrap();
    assert_eq!(worker.join().unwrap(), Some(-3.0));
    // One more level is refused.
    let text = format!("{}x{}", "-(1+".repeat(128), ")".repeat(128));
    assert!(expr::parse(&text).is_err());
}
