//! The parser of the expression language: tokens to an [`Expr`] tree.
//!
//! Owns the operator-precedence parser with explicit stacks. It must
//! never recurse (so no input can exhaust the machine stack), never
//! panic on any input text and never build a tree taller than
//! [`MAX_DEPTH`].

use super::lexer::{Lexer, TokKind, Token};
use super::{BinOp, Expr, ExprError, Func, MAX_DEPTH};

/// Parses `text`, which starts at `line` and `column` of a larger text.
pub(super) fn parse_at(text: &str, line: usize, column: usize) -> Result<Expr, ExprError> {
    Parser {
        lexer: Lexer::new(text, line.max(1), column.max(1)),
        peeked: None,
        operands: Vec::new(),
        frames: Vec::new(),
        nesting: 0,
    }
    .run()
}

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
