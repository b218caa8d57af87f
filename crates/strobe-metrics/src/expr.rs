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

use std::fmt;

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
    Parser {
        lexer: Lexer::new(text, line.max(1), column.max(1)),
        peeked: None,
        operands: Vec::new(),
        frames: Vec::new(),
        nesting: 0,
    }
    .run()
}

impl std::str::FromStr for Expr {
    type Err = ExprError;

    fn from_str(s: &str) -> Result<Expr, ExprError> {
        parse(s)
    }
}

// ---------------------------------------------------------------- lexer

#[derive(Debug, Clone, PartialEq)]
enum TokKind {
    Num(f64),
    /// A name; `true` when written in backquotes (never a function).
    Name(String, bool),
    Op(BinOp),
    LParen,
    RParen,
    Comma,
    End,
}

#[derive(Debug, Clone)]
struct Token {
    kind: TokKind,
    line: usize,
    column: usize,
    /// The text of the token as written (for messages).
    text: String,
}

impl Token {
    fn error(&self, message: String) -> ExprError {
        ExprError {
            line: self.line,
            column: self.column,
            message,
        }
    }

    fn describe(&self) -> String {
        match &self.kind {
            TokKind::End => "the end of the expression".to_string(),
            TokKind::Num(_) => format!("the number {}", self.text),
            TokKind::Name(..) => format!("the name {}", self.text),
            _ => format!("'{}'", self.text),
        }
    }
}

struct Lexer<'a> {
    text: &'a str,
    /// Byte offset of the next character.
    pos: usize,
    line: usize,
    column: usize,
    /// Line and column just after the last token read.
    end_line: usize,
    end_column: usize,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == ':'
}

/// Whether `name` can be written without backquotes.
pub fn is_bare_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if is_name_start(c) => chars.all(is_name_char),
        _ => false,
    }
}

impl<'a> Lexer<'a> {
    fn new(text: &'a str, line: usize, column: usize) -> Self {
        Lexer {
            text,
            pos: 0,
            line,
            column,
            end_line: line,
            end_column: column,
        }
    }

    fn peek_char(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn peek_char2(&self) -> Option<char> {
        let mut it = self.text[self.pos..].chars();
        it.next();
        it.next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn error_here(&self, message: String) -> ExprError {
        ExprError {
            line: self.line,
            column: self.column,
            message,
        }
    }

    fn next_token(&mut self) -> Result<Token, ExprError> {
        while let Some(c) = self.peek_char() {
            if c.is_whitespace() {
                self.bump();
            } else {
                break;
            }
        }
        let (line, column, start) = (self.line, self.column, self.pos);
        let Some(c) = self.peek_char() else {
            return Ok(Token {
                kind: TokKind::End,
                line: self.end_line,
                column: self.end_column,
                text: String::new(),
            });
        };
        let kind = match c {
            '+' => {
                self.bump();
                TokKind::Op(BinOp::Add)
            }
            '-' | '−' => {
                self.bump();
                TokKind::Op(BinOp::Sub)
            }
            '*' | '×' => {
                self.bump();
                TokKind::Op(BinOp::Mul)
            }
            '/' | '÷' => {
                self.bump();
                TokKind::Op(BinOp::Div)
            }
            '(' => {
                self.bump();
                TokKind::LParen
            }
            ')' => {
                self.bump();
                TokKind::RParen
            }
            ',' => {
                self.bump();
                TokKind::Comma
            }
            '`' => self.backquoted()?,
            c if c.is_ascii_digit() => self.number()?,
            '.' if self.peek_char2().is_some_and(|d| d.is_ascii_digit()) => self.number()?,
            c if is_name_start(c) => {
                while self.peek_char().is_some_and(is_name_char) {
                    self.bump();
                }
                TokKind::Name(self.text[start..self.pos].to_string(), false)
            }
            other => {
                return Err(self.error_here(format!(
                    "unexpected character {other:?}; expected a number, a name, an operator \
                     (+ - * /), a parenthesis or a comma (names with other characters go in \
                     backquotes, like `task-clock`)"
                )))
            }
        };
        self.end_line = self.line;
        self.end_column = self.column;
        Ok(Token {
            kind,
            line,
            column,
            text: self.text[start..self.pos].to_string(),
        })
    }

    fn backquoted(&mut self) -> Result<TokKind, ExprError> {
        let (line, column) = (self.line, self.column);
        self.bump();
        let start = self.pos;
        loop {
            match self.peek_char() {
                Some('`') => break,
                Some('\n') | None => {
                    return Err(ExprError {
                        line,
                        column,
                        message: "name in backquotes is not closed; expected a closing '`' \
                                  on the same line"
                            .to_string(),
                    })
                }
                Some(_) => {
                    self.bump();
                }
            }
        }
        let name = self.text[start..self.pos].to_string();
        if name.is_empty() {
            return Err(ExprError {
                line,
                column,
                message: "empty name in backquotes; expected a counter or metric name \
                          between the '`'"
                    .to_string(),
            });
        }
        self.bump();
        Ok(TokKind::Name(name, true))
    }

    fn number(&mut self) -> Result<TokKind, ExprError> {
        let (line, column, start) = (self.line, self.column, self.pos);
        while self.peek_char().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
        if self.peek_char() == Some('.') {
            self.bump();
            while self.peek_char().is_some_and(|c| c.is_ascii_digit()) {
                self.bump();
            }
        }
        if matches!(self.peek_char(), Some('e' | 'E')) {
            self.bump();
            if matches!(self.peek_char(), Some('+' | '-')) {
                self.bump();
            }
            if !self.peek_char().is_some_and(|c| c.is_ascii_digit()) {
                return Err(self.error_here(
                    "expected the digits of the exponent after 'e' in the number".to_string(),
                ));
            }
            while self.peek_char().is_some_and(|c| c.is_ascii_digit()) {
                self.bump();
            }
        }
        if let Some(c) = self.peek_char() {
            if is_name_char(c) {
                return Err(self.error_here(format!(
                    "unexpected character {c:?} right after a number; expected an operator, \
                     ')' or ',' (names cannot start with a digit)"
                )));
            }
        }
        let text = &self.text[start..self.pos];
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(TokKind::Num(v)),
            _ => Err(ExprError {
                line,
                column,
                message: format!("the number {text} is too large; expected a finite number"),
            }),
        }
    }
}

// --------------------------------------------------------------- parser
//
// An operator-precedence parser with explicit stacks: it never recurses,
// so no input can exhaust the machine stack; the nesting counter and the
// tree-height check keep the trees it builds within MAX_DEPTH.

/// An expression and the height of its tree.
type Node = (Expr, usize);

/// Something opened and not yet finished.
enum Frame {
    /// A binary operator waiting for its right operand.
    Bin(BinOp, Token),
    /// A unary minus waiting for its operand.
    Neg(Token),
    /// An open parenthesis.
    Paren(Token),
    /// An open function call: the function, its name, its '(' and
    /// where its arguments start on the operand stack.
    Call(Func, Token, Token, usize),
}

fn too_deep(tok: &Token) -> ExprError {
    tok.error(format!(
        "expression nested more than {MAX_DEPTH} levels deep; split it into several \
         metrics (or write long chains of + as sum(a, b, ...))"
    ))
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    peeked: Option<Token>,
    operands: Vec<Node>,
    frames: Vec<Frame>,
    /// Open parentheses, calls and unary minus signs.
    nesting: usize,
}

impl Parser<'_> {
    fn next(&mut self) -> Result<Token, ExprError> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lexer.next_token(),
        }
    }

    fn peek_is_lparen(&mut self) -> Result<bool, ExprError> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lexer.next_token()?);
        }
        Ok(matches!(
            self.peeked,
            Some(Token {
                kind: TokKind::LParen,
                ..
            })
        ))
    }

    fn open(&mut self, frame: Frame, tok: &Token) -> Result<(), ExprError> {
        self.nesting += 1;
        if self.nesting > MAX_DEPTH {
            return Err(too_deep(tok));
        }
        self.frames.push(frame);
        Ok(())
    }

    fn pop_operand(&mut self) -> Node {
        // The state machine pushes an operand before every reduction
        // that needs one; an empty stack cannot happen, but never panic.
        self.operands.pop().unwrap_or((Expr::Num(f64::NAN), 1))
    }

    /// Reduces pending unary minus signs and binary operators binding at
    /// least as tightly as `min_prec` (0: all of them).
    fn reduce(&mut self, min_prec: u8) -> Result<(), ExprError> {
        loop {
            match self.frames.last() {
                Some(Frame::Neg(_)) => {
                    let Some(Frame::Neg(tok)) = self.frames.pop() else {
                        unreachable!()
                    };
                    self.nesting -= 1;
                    let (inner, h) = self.pop_operand();
                    if h + 1 > MAX_DEPTH {
                        return Err(too_deep(&tok));
                    }
                    self.operands.push((Expr::Neg(Box::new(inner)), h + 1));
                }
                Some(Frame::Bin(op, _)) if op.precedence() >= min_prec => {
                    let Some(Frame::Bin(op, tok)) = self.frames.pop() else {
                        unreachable!()
                    };
                    let (r, hr) = self.pop_operand();
                    let (l, hl) = self.pop_operand();
                    let h = hl.max(hr) + 1;
                    if h > MAX_DEPTH {
                        return Err(too_deep(&tok));
                    }
                    self.operands
                        .push((Expr::Binary(op, Box::new(l), Box::new(r)), h));
                }
                _ => return Ok(()),
            }
        }
    }

    /// The error for a token that cannot follow a complete operand,
    /// worded for the innermost open parenthesis or call.
    fn unexpected_after_operand(&self, tok: &Token) -> ExprError {
        let inner = self
            .frames
            .iter()
            .rev()
            .find(|f| matches!(f, Frame::Paren(_) | Frame::Call(..)));
        match inner {
            Some(Frame::Paren(open)) => tok.error(format!(
                "expected ')' to close the '(' at line {}, column {}, found {}",
                open.line,
                open.column,
                tok.describe()
            )),
            Some(Frame::Call(_, name, open, _)) => tok.error(format!(
                "expected ',' or ')' in the arguments of {}(...) opened at line {}, \
                 column {}, found {}",
                name.text,
                open.line,
                open.column,
                tok.describe()
            )),
            _ => tok.error(format!(
                "expected an operator (+ - * /) or the end of the expression, found {}",
                tok.describe()
            )),
        }
    }

    fn run(mut self) -> Result<Expr, ExprError> {
        loop {
            // Expecting an operand: a number, a name, a call, '(' or a sign.
            let tok = self.next()?;
            match &tok.kind {
                TokKind::Op(BinOp::Sub) => {
                    self.open(Frame::Neg(tok.clone()), &tok)?;
                    continue;
                }
                TokKind::Op(BinOp::Add) => continue,
                TokKind::LParen => {
                    self.open(Frame::Paren(tok.clone()), &tok)?;
                    continue;
                }
                TokKind::Num(v) => self.operands.push((Expr::Num(*v), 1)),
                TokKind::Name(name, backquoted) => {
                    if !backquoted && self.peek_is_lparen()? {
                        let Some(func) = Func::from_name(name) else {
                            return Err(tok.error(format!(
                                "unknown function `{name}`; expected min, max, sum, \
                                 if_nonzero or ifnz (a name is never followed by '(')"
                            )));
                        };
                        let open = self.next()?;
                        let start = self.operands.len();
                        self.open(Frame::Call(func, tok.clone(), open.clone(), start), &open)?;
                        continue;
                    }
                    self.operands.push((Expr::Name(name.clone()), 1));
                }
                _ => {
                    return Err(tok.error(format!(
                        "expected a number, a name, a function call or '(', found {}",
                        tok.describe()
                    )))
                }
            }
            // Expecting an operator, ',' , ')' or the end.
            loop {
                let tok = self.next()?;
                match tok.kind {
                    TokKind::Op(op) => {
                        self.reduce(op.precedence())?;
                        self.frames.push(Frame::Bin(op, tok));
                        break;
                    }
                    TokKind::Comma => {
                        self.reduce(0)?;
                        if !matches!(self.frames.last(), Some(Frame::Call(..))) {
                            return Err(self.unexpected_after_operand(&tok));
                        }
                        break;
                    }
                    TokKind::RParen => {
                        self.reduce(0)?;
                        match self.frames.pop() {
                            Some(Frame::Paren(_)) => self.nesting -= 1,
                            Some(Frame::Call(func, name, _, start)) => {
                                self.nesting -= 1;
                                let start = start.min(self.operands.len());
                                let args: Vec<Node> = self.operands.drain(start..).collect();
                                if !func.arity_ok(args.len()) {
                                    return Err(name.error(format!(
                                        "{}(...) takes {}, found {}",
                                        name.text,
                                        func.arity_text(),
                                        args.len()
                                    )));
                                }
                                let h = args.iter().map(|a| a.1).max().unwrap_or(0) + 1;
                                if h > MAX_DEPTH {
                                    return Err(too_deep(&name));
                                }
                                let args = args.into_iter().map(|a| a.0).collect();
                                self.operands.push((Expr::Call(func, args), h));
                            }
                            other => {
                                if let Some(f) = other {
                                    self.frames.push(f);
                                }
                                return Err(self.unexpected_after_operand(&tok));
                            }
                        }
                    }
                    TokKind::End => {
                        self.reduce(0)?;
                        if self.frames.is_empty() {
                            return Ok(self.pop_operand().0);
                        }
                        return Err(self.unexpected_after_operand(&tok));
                    }
                    _ => return Err(self.unexpected_after_operand(&tok)),
                }
            }
        }
    }
}

// -------------------------------------------------------------- printer

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

/// Writes the expression so that [`parse`] reads back the same tree:
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

// ------------------------------------------------------------ semantics

const MISSING: f64 = f64::NAN;

/// Internally a missing value is NaN; every operation turns a
/// non-finite result into NaN so infinities never survive.
#[inline(always)]
fn finite(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        MISSING
    }
}

#[inline(always)]
fn from_opt(v: Option<f64>) -> f64 {
    match v {
        Some(x) => finite(x),
        None => MISSING,
    }
}

#[inline(always)]
fn to_opt(v: f64) -> Option<f64> {
    if v.is_finite() {
        Some(v)
    } else {
        None
    }
}

#[inline(always)]
fn apply(op: BinOp, a: f64, b: f64) -> f64 {
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
fn fold(func: Func, a: f64, b: f64) -> f64 {
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
fn if_nonzero(c: f64, a: f64, b: f64) -> f64 {
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

    /// Compiles the expression into a [`Program`] whose inputs are slots:
    /// `resolve` maps each name to its slot index (called once per name
    /// occurrence, left to right), or `None` when the name is unknown.
    pub fn compile(
        &self,
        mut resolve: impl FnMut(&str) -> Option<usize>,
    ) -> Result<Program, CompileError> {
        let mut c = Compiler {
            ops: Vec::new(),
            sp: 0,
            max_sp: 0,
            slots: 0,
        };
        c.emit(self, &mut resolve)?;
        Ok(Program {
            ops: c.ops,
            max_stack: c.max_sp,
            slots: c.slots,
        })
    }

    /// Compiles against a slot table given as names: slot `i` holds the
    /// value of `slots[i]`.
    pub fn compile_with_slots(&self, slots: &[&str]) -> Result<Program, CompileError> {
        self.compile(|n| slots.iter().position(|s| *s == n))
    }
}

// ------------------------------------------------------------- programs

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Const(f64),
    Load(usize),
    Neg,
    Bin(BinOp),
    /// Pops two, pushes the min/max/sum of them.
    Fold(Func),
    /// Pops condition, then-value and else-value.
    IfNz,
    /// `Bin` with a slot as its right operand (not on the stack).
    BinLoad(BinOp, usize),
    /// `Bin` with a constant right operand.
    BinConst(BinOp, f64),
    /// `Fold` with a slot as its right operand.
    FoldLoad(Func, usize),
    /// `Fold` with a constant right operand.
    FoldConst(Func, f64),
}

/// An expression compiled against a slot table: a postfix program that
/// evaluates with no allocation, over a stack that lives on the machine
/// stack.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    ops: Vec<Op>,
    max_stack: usize,
    slots: usize,
}

struct Compiler {
    ops: Vec<Op>,
    sp: usize,
    max_sp: usize,
    slots: usize,
}

/// Work left while compiling: a subtree to visit (with its depth) or an
/// operation to emit once its operands are on the stack (and how many
/// values it pops net).
enum Work<'a> {
    Visit(&'a Expr, usize),
    Emit(Op, usize),
}

impl Compiler {
    fn push(&mut self, op: Op) {
        self.ops.push(op);
        self.sp += 1;
        self.max_sp = self.max_sp.max(self.sp);
    }

    /// Emits postfix code for `e`, with an explicit work list rather than
    /// recursion (so compiling needs little machine stack).
    fn emit(
        &mut self,
        e: &Expr,
        resolve: &mut impl FnMut(&str) -> Option<usize>,
    ) -> Result<(), CompileError> {
        let mut work = vec![Work::Visit(e, 0)];
        while let Some(w) = work.pop() {
            let (e, depth) = match w {
                Work::Emit(op, pops) => {
                    // A right operand that compiled to a single load or
                    // constant (a leaf: anything else ends with an
                    // operator) is folded into the operation.
                    let fused = match (op, self.ops.last()) {
                        (Op::Bin(b), Some(&Op::Load(i))) => Some(Op::BinLoad(b, i)),
                        (Op::Bin(b), Some(&Op::Const(v))) => Some(Op::BinConst(b, v)),
                        (Op::Fold(f), Some(&Op::Load(i))) => Some(Op::FoldLoad(f, i)),
                        (Op::Fold(f), Some(&Op::Const(v))) => Some(Op::FoldConst(f, v)),
                        _ => None,
                    };
                    match (fused, self.ops.last_mut()) {
                        (Some(f), Some(last)) => *last = f,
                        _ => self.ops.push(op),
                    }
                    self.sp -= pops;
                    continue;
                }
                Work::Visit(e, depth) => (e, depth),
            };
            if depth >= MAX_DEPTH {
                return Err(CompileError::TooDeep);
            }
            match e {
                Expr::Num(v) => self.push(Op::Const(finite(*v))),
                Expr::Name(n) => {
                    let slot = resolve(n).ok_or_else(|| CompileError::UnknownName(n.clone()))?;
                    self.slots = self.slots.max(slot.saturating_add(1));
                    self.push(Op::Load(slot));
                }
                Expr::Neg(inner) => {
                    work.push(Work::Emit(Op::Neg, 0));
                    work.push(Work::Visit(inner, depth + 1));
                }
                Expr::Binary(op, l, r) => {
                    work.push(Work::Emit(Op::Bin(*op), 1));
                    work.push(Work::Visit(r, depth + 1));
                    work.push(Work::Visit(l, depth + 1));
                }
                Expr::Call(Func::IfNonzero, args) => match args.as_slice() {
                    [c, a, b] => {
                        work.push(Work::Emit(Op::IfNz, 2));
                        work.push(Work::Visit(b, depth + 1));
                        work.push(Work::Visit(a, depth + 1));
                        work.push(Work::Visit(c, depth + 1));
                    }
                    // Only hand-built trees get here: missing.
                    _ => self.push(Op::Const(MISSING)),
                },
                Expr::Call(func, args) => match args.split_first() {
                    Some((first, rest)) => {
                        for a in rest.iter().rev() {
                            work.push(Work::Emit(Op::Fold(*func), 1));
                            work.push(Work::Visit(a, depth + 1));
                        }
                        work.push(Work::Visit(first, depth + 1));
                    }
                    None => self.push(Op::Const(MISSING)),
                },
            }
            if self.max_sp > MAX_STACK {
                return Err(CompileError::TooDeep);
            }
        }
        debug_assert_eq!(self.sp, 1);
        Ok(())
    }
}

/// Stack size used for programs that need little stack (nearly all).
const SMALL_STACK: usize = 16;

impl Program {
    /// Evaluates the program; slot `i` of the table is `slots[i]`
    /// (`None`, a non-finite value or a slot past the end: missing).
    /// Never allocates, never panics.
    #[inline]
    pub fn eval(&self, slots: &[Option<f64>]) -> Option<f64> {
        self.eval_with(|i| slots.get(i).copied().flatten())
    }

    /// Like [`Program::eval`], with slot values given by a function.
    #[inline]
    pub fn eval_with(&self, load: impl Fn(usize) -> Option<f64>) -> Option<f64> {
        let v = if self.max_stack <= SMALL_STACK {
            self.run::<SMALL_STACK>(|i| from_opt(load(i)))
        } else {
            self.run::<MAX_STACK>(|i| from_opt(load(i)))
        };
        to_opt(v)
    }

    /// Like [`Program::eval`] over plain numbers where any non-finite
    /// value (NaN, by convention) is missing; returns NaN for missing.
    /// The fastest form, for callers that keep counter values as `f64`.
    #[inline]
    pub fn eval_f64(&self, slots: &[f64]) -> f64 {
        let load = |i: usize| match slots.get(i) {
            Some(v) => finite(*v),
            None => MISSING,
        };
        if self.max_stack <= SMALL_STACK {
            self.run::<SMALL_STACK>(load)
        } else {
            self.run::<MAX_STACK>(load)
        }
    }

    #[inline(always)]
    fn run<const N: usize>(&self, load: impl Fn(usize) -> f64) -> f64 {
        let mut st = [0.0f64; N];
        let mut sp = 0usize;
        // `compile` guarantees: the stack never underflows, never holds
        // more than `max_stack <= N` values and ends with one value.
        for op in &self.ops {
            match *op {
                Op::Const(v) => {
                    st[sp] = v;
                    sp += 1;
                }
                Op::Load(i) => {
                    st[sp] = load(i);
                    sp += 1;
                }
                Op::Neg => st[sp - 1] = -st[sp - 1],
                Op::Bin(op) => {
                    sp -= 1;
                    st[sp - 1] = apply(op, st[sp - 1], st[sp]);
                }
                Op::Fold(func) => {
                    sp -= 1;
                    st[sp - 1] = fold(func, st[sp - 1], st[sp]);
                }
                Op::IfNz => {
                    sp -= 2;
                    st[sp - 1] = if_nonzero(st[sp - 1], st[sp], st[sp + 1]);
                }
                Op::BinLoad(op, i) => st[sp - 1] = apply(op, st[sp - 1], load(i)),
                Op::BinConst(op, v) => st[sp - 1] = apply(op, st[sp - 1], v),
                Op::FoldLoad(func, i) => st[sp - 1] = fold(func, st[sp - 1], load(i)),
                Op::FoldConst(func, v) => st[sp - 1] = fold(func, st[sp - 1], v),
            }
        }
        finite(st[0])
    }

    /// Number of operations in the program.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the program is empty (never, for a compiled expression).
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The most values the program holds on its stack at once.
    pub fn max_stack(&self) -> usize {
        self.max_stack
    }

    /// One more than the highest slot index the program reads (the
    /// length a slot table needs; shorter tables read as missing).
    pub fn slots(&self) -> usize {
        self.slots
    }
}
