//! Compiled expressions: an [`Expr`] to a compact postfix [`Program`]
//! over a slot table, and its evaluation.
//!
//! Owns the compiler (an explicit work list, no recursion) and the
//! evaluator that runs on a fixed-size stack. Evaluation must never
//! allocate, never panic and never return an infinite or NaN value.

use super::eval::{apply, finite, fold, from_opt, if_nonzero, to_opt, MISSING};
use super::{BinOp, CompileError, Expr, Func, MAX_DEPTH, MAX_STACK};

impl Expr {
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
