//! Derived-metric expressions: parsing, printing and evaluation.
//!
//! Owns the expression language of derived metrics (seed 003's "complex
//! metrics table entry: metric name, an expression for calculation the
//! metric from the counters"): a hand-written lexer and an
//! operator-precedence parser with explicit stacks (it never recurses, so
//! no input can exhaust the machine stack) producing an [`Expr`] tree, a
//! printer that writes the tree back as text the parser reads again, a
//! tree-walking evaluator, and a compiler to a compact postfix [`Program`]
//! that evaluates without allocating. It must never panic on any input
//! text, never build a tree taller than [`MAX_DEPTH`], and never return
//! an infinite or NaN value: anything that is not a finite number is
//! *missing*.
//! It knows nothing about counters, files or the catalog; callers map
//! names to values or to slots.
//!
//! # Grammar
//!
//! ```text
//! expr    := product (('+' | '-' | '−') product)*
//! product := unary (('*' | '×' | '/' | '÷') unary)*
//! unary   := ('-' | '−' | '+') unary | primary
//! primary := number | name | function '(' expr (',' expr)* ')' | '(' expr ')'
//! number  := digits ['.' digits] [('e' | 'E') ['+' | '-'] digits]   (or '.' digits ...)
//! name    := [A-Za-z_][A-Za-z0-9_.:]*   |   '`' any characters but '`' and newline '`'
//! function:= min | max | sum | if_nonzero | ifnz
//! ```
//!
//! Whitespace, newlines included, may appear between any two tokens.
//! A dash is the minus operator, so names containing dashes (perf's
//! `task-clock`, `cache-misses`) or slashes (`cpu/cycles/`) are written in
//! backquotes: `` `task-clock` / duration_time ``. Function names are
//! only functions when followed by `(`; otherwise `min` is a plain name.
//! `min`, `max` and `sum` take one or more arguments; `if_nonzero` (alias
//! `ifnz`) takes exactly three: condition, value if the condition is
//! non-zero, value if it is zero.
//!
//! Errors carry the 1-based line and column (in characters) of the
//! offending character, or of the position just after the last token
//! when the text ends too early, and say what was expected.
//!
//! # Semantics
//!
//! Values are `f64`; a value may be *missing* (`None`). A missing input,
//! a division by zero (`x/0`, `0/0` included) and any intermediate result
//! that is not finite (overflow to infinity, NaN) are missing, and a
//! missing operand makes the result of `+ - * /`, unary minus, `min`,
//! `max` and `sum` missing. `if_nonzero(c, a, b)` is missing when `c` is
//! missing and otherwise is `a` (when `c != 0`) or `b`, whatever the
//! other branch holds.
//!
//! # Speed
//!
//! [`Program::eval`] runs a postfix program (a right operand that is a
//! slot or a constant is fused into its operator) over a small fixed
//! stack on the machine stack: no allocation, one `match` per operation.
//! Measured with `cargo run --release -p strobe-metrics --example
//! expr_speed` (prints, asserts nothing) on a 2-core AMD EPYC VM:
//! `instructions / cycles` about 125-140 million evaluations/s (7-8 ns),
//! `` `page-faults` / duration_time * 1e9 `` 90-110 M/s, a 12-operation
//! expression with `if_nonzero`, `max` and `min` 33-43 M/s, and
//! [`crate::defs::Plan::evaluate`] over the 12 built-in metrics about
//! 140 M metric values/s: well above the 10 M metric values/s needed.

mod eval;
mod lexer;
mod parser;
mod printer;
mod program;

pub use lexer::is_bare_name;
pub use program::Program;

/// How deeply an expression may nest: parentheses, function calls and
/// unary minus signs inside one another, and the height of the tree the
/// parser builds (so a chain `a + b + c + ...` of more than this many
/// operators is refused as well; write `sum(a, b, c, ...)` instead).
pub const MAX_DEPTH: usize = 256;

/// Most values a compiled [`Program`] may hold on its evaluation stack.
/// Every expression the parser accepts fits (the stack needs at most
/// about two entries per nesting level).
pub const MAX_STACK: usize = 1024;

/// A binary arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-` (also `−`)
    Sub,
    /// `*` (also `×`)
    Mul,
    /// `/` (also `÷`); division by zero is missing.
    Div,
}

impl BinOp {
    fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
        }
    }

    fn precedence(self) -> u8 {
        match self {
            BinOp::Add | BinOp::Sub => 1,
            BinOp::Mul | BinOp::Div => 2,
        }
    }
}

/// A built-in function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Func {
    /// `min(a, ...)`: the smallest argument.
    Min,
    /// `max(a, ...)`: the largest argument.
    Max,
    /// `sum(a, ...)`: the sum of the arguments.
    Sum,
    /// `if_nonzero(c, a, b)` (alias `ifnz`): `a` when `c != 0`, else `b`.
    IfNonzero,
}

impl Func {
    /// The function a name denotes, if any (`ifnz` is `if_nonzero`).
    pub fn from_name(name: &str) -> Option<Func> {
        match name {
            "min" => Some(Func::Min),
            "max" => Some(Func::Max),
            "sum" => Some(Func::Sum),
            "if_nonzero" | "ifnz" => Some(Func::IfNonzero),
            _ => None,
        }
    }

    /// The name the printer writes.
    pub fn name(self) -> &'static str {
        match self {
            Func::Min => "min",
            Func::Max => "max",
            Func::Sum => "sum",
            Func::IfNonzero => "if_nonzero",
        }
    }

    fn arity_ok(self, n: usize) -> bool {
        match self {
            Func::Min | Func::Max | Func::Sum => n >= 1,
            Func::IfNonzero => n == 3,
        }
    }

    fn arity_text(self) -> &'static str {
        match self {
            Func::Min | Func::Max | Func::Sum => "one or more arguments",
            Func::IfNonzero => "exactly 3 arguments (condition, value if non-zero, value if zero)",
        }
    }
}

/// A parsed expression.
///
/// Trees from [`parse`] are at most [`MAX_DEPTH`] levels high. Printing,
/// [`Expr::eval`], [`Expr::names`], cloning, comparing and dropping
/// recurse over the tree; for the tallest tree the parser accepts that
/// needs well under 512 KiB of stack even in debug builds. Trees built by
/// hand should stay as shallow ([`Expr::compile`], which does not
/// recurse, refuses taller ones with an error).
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A constant (the parser only produces finite, non-negative ones).
    Num(f64),
    /// A named input: a counter, an event or another metric.
    Name(String),
    /// Unary minus.
    Neg(Box<Expr>),
    /// A binary operation.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// A function call with its arguments.
    Call(Func, Vec<Expr>),
}

/// A syntax error in an expression: where (1-based line and column, in
/// characters) and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ExprError {
    /// 1-based line of the offending character.
    pub line: usize,
    /// 1-based column (in characters) of the offending character.
    pub column: usize,
    /// What was wrong and what was expected.
    pub message: String,
}

/// Why an [`Expr`] could not be compiled into a [`Program`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// The expression names something the slot table does not hold.
    #[error("unknown name `{0}` in the expression: it is neither a counter nor a metric the caller provides")]
    UnknownName(String),
    /// The tree is deeper than [`MAX_DEPTH`] (only hand-built or
    /// substituted trees can be).
    #[error("expression nested more than {MAX_DEPTH} levels deep; split it into several metrics")]
    TooDeep,
}

/// Parses an expression; see the [module documentation](self) for the
/// grammar. Never panics, whatever the input.
pub fn parse(text: &str) -> Result<Expr, ExprError> {
    parse_at(text, 1, 1)
}

/// Parses an expression that starts at `line` and `column` of a larger
/// text (a definitions file): every position in errors, messages
/// included, is then a position in that text.
pub fn parse_at(text: &str, line: usize, column: usize) -> Result<Expr, ExprError> {
    parser::parse_at(text, line, column)
}

impl std::str::FromStr for Expr {
    type Err = ExprError;

    fn from_str(s: &str) -> Result<Expr, ExprError> {
        parse(s)
    }
}
