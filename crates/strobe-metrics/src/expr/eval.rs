//! The semantics of expressions: missing values, the arithmetic of the
//! operators and functions, and the tree-walking evaluator.
//!
//! Owns how a missing or non-finite value propagates (internally NaN)
//! and the operations both the tree walker here and the compiled
//! [`Program`](super::Program) share. It must never return an infinite
//! or NaN value to callers: anything not a finite number is missing.

use super::{BinOp, Expr, Func};

pub(super) const MISSING: f64 = f64::NAN;

/// Internally a missing value is NaN; every operation turns a
/// non-finite result into NaN so infinities never survive.
#[inline(always)]
pub(super) fn finite(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        MISSING
    }
}

#[inline(always)]
pub(super) fn from_opt(v: Option<f64>) -> f64 {
    match v {
        Some(x) => finite(x),
        None => MISSING,
    }
}

#[inline(always)]
pub(super) fn to_opt(v: f64) -> Option<f64> {
    if v.is_finite() {
        Some(v)
    } else {
        None
    }
}

#[inline(always)]
pub(super) fn apply(op: BinOp, a: f64, b: f64) -> f64 {
    match op {
        BinOp::Add => finite(a + b),
        BinOp::Sub => finite(a - b),
        BinOp::Mul => finite(a * b),
        BinOp::Div => {
            if b == 0.0 {
                MISSING
            } else {
                finite(a / b)
            }
        }
    }
}

#[inline(always)]
pub(super) fn fold(func: Func, a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return MISSING;
    }
    match func {
        Func::Min => a.min(b),
        Func::Max => a.max(b),
        _ => finite(a + b),
    }
}

#[inline(always)]
pub(super) fn if_nonzero(c: f64, a: f64, b: f64) -> f64 {
    if c.is_nan() {
        MISSING
    } else if c != 0.0 {
        a
    } else {
        b
    }
}

impl Expr {
    /// The distinct names the expression uses, in order of first
    /// appearance.
    pub fn names(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        self.visit_names(&mut |n| {
            if !out.contains(&n) {
                out.push(n);
            }
        });
        out
    }

    /// Calls `f` for every name occurrence, left to right.
    pub fn visit_names<'a>(&'a self, f: &mut impl FnMut(&'a str)) {
        match self {
            Expr::Num(_) => {}
            Expr::Name(n) => f(n),
            Expr::Neg(e) => e.visit_names(f),
            Expr::Binary(_, l, r) => {
                l.visit_names(f);
                r.visit_names(f);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.visit_names(f)),
        }
    }

    /// Evaluates the tree directly, asking `lookup` for the value of each
    /// name (`None`: missing). Slower than a compiled [`Program`]; meant
    /// for one-off values and tests.
    pub fn eval(&self, lookup: &mut impl FnMut(&str) -> Option<f64>) -> Option<f64> {
        to_opt(self.eval_raw(lookup))
    }

    fn eval_raw(&self, lookup: &mut impl FnMut(&str) -> Option<f64>) -> f64 {
        match self {
            Expr::Num(v) => finite(*v),
            Expr::Name(n) => from_opt(lookup(n)),
            Expr::Neg(e) => -e.eval_raw(lookup),
            Expr::Binary(op, l, r) => {
                let a = l.eval_raw(lookup);
                let b = r.eval_raw(lookup);
                apply(*op, a, b)
            }
            Expr::Call(Func::IfNonzero, args) => match args.as_slice() {
                [c, a, b] => {
                    let c = c.eval_raw(lookup);
                    let a = a.eval_raw(lookup);
                    let b = b.eval_raw(lookup);
                    if_nonzero(c, a, b)
                }
                _ => MISSING,
            },
            Expr::Call(func, args) => {
                let mut acc: Option<f64> = None;
                for a in args {
                    let v = a.eval_raw(lookup);
                    acc = Some(match acc {
                        None => v,
                        Some(x) => fold(*func, x, v),
                    });
                }
                acc.unwrap_or(MISSING)
            }
        }
    }
}
