//! The lexer of the expression language: numbers, bare and backquoted
//! names, operators, parentheses and commas, each with its line and
//! column.
//!
//! Owns [`Token`] and [`Lexer`] and which names need backquotes. It must
//! never panic on any input text and never build trees: the parser does.

use super::{BinOp, ExprError};

#[derive(Debug, Clone, PartialEq)]
pub(super) enum TokKind {
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
pub(super) struct Token {
    pub(super) kind: TokKind,
    pub(super) line: usize,
    pub(super) column: usize,
    /// The text of the token as written (for messages).
    pub(super) text: String,
}

impl Token {
    pub(super) fn error(&self, message: String) -> ExprError {
        ExprError {
            line: self.line,
            column: self.column,
            message,
        }
    }

    pub(super) fn describe(&self) -> String {
        match &self.kind {
            TokKind::End => "the end of the expression".to_string(),
            TokKind::Num(_) => format!("the number {}", self.text),
            TokKind::Name(..) => format!("the name {}", self.text),
            _ => format!("'{}'", self.text),
        }
    }
}

pub(super) struct Lexer<'a> {
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
    pub(super) fn new(text: &'a str, line: usize, column: usize) -> Self {
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

    pub(super) fn next_token(&mut self) -> Result<Token, ExprError> {
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
