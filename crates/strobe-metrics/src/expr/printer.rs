//! The printer of the expression language: an [`Expr`] tree back to
//! text the parser reads again.
//!
//! Owns [`Expr`]'s `Display`. It must never write text that parses to a
//! different tree.

use std::fmt;

use super::lexer::is_bare_name;
use super::Expr;

impl Expr {
    fn precedence(&self) -> u8 {
        match self {
            Expr::Binary(op, ..) => op.precedence(),
            Expr::Neg(_) => 3,
            Expr::Num(v) if !(v.is_finite() && v.is_sign_positive()) => 0,
            _ => 4,
        }
    }

    fn write_child(&self, f: &mut fmt::Formatter<'_>, parens: bool) -> fmt::Result {
        if parens {
            f.write_str("(")?;
            fmt::Display::fmt(self, f)?;
            f.write_str(")")
        } else {
            fmt::Display::fmt(self, f)
        }
    }
}

/// Writes the expression so that [`parse`](super::parse) reads back the same tree:
/// minimal parentheses, names in backquotes when they are not bare names,
/// numbers in Rust's shortest round-trip form. (A hand-built negative
/// constant prints as `(-x)` and a non-finite one as `(0/0)`; both read
/// back as equivalent expressions. Names holding a backquote or a newline
/// cannot be written.)
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Num(v) => {
                if !v.is_finite() {
                    f.write_str("0/0")
                } else if v.is_sign_negative() {
                    write!(f, "-{:?}", -v)
                } else {
                    write!(f, "{v:?}")
                }
            }
            Expr::Name(n) => {
                if is_bare_name(n) {
                    f.write_str(n)
                } else {
                    write!(f, "`{n}`")
                }
            }
            Expr::Neg(inner) => {
                f.write_str("-")?;
                inner.write_child(f, inner.precedence() < 3)
            }
            Expr::Binary(op, l, r) => {
                let p = op.precedence();
                l.write_child(f, l.precedence() < p)?;
                write!(f, " {} ", op.symbol())?;
                r.write_child(f, r.precedence() <= p)
            }
            Expr::Call(func, args) => {
                write!(f, "{}(", func.name())?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    fmt::Display::fmt(a, f)?;
                }
                f.write_str(")")
            }
        }
    }
}
