//! Planning: turning requested names into the counter specs to count
//! and the compiled programs that compute each requested value.
//!
//! Owns [`Plan`] and [`MetricSet::plan`], which substitutes derived
//! metrics into one another (bounded in depth and size) and compiles the
//! result over counter slots. It must never read definitions files, open
//! counters or touch the catalog: it hands out event spec strings and
//! evaluates the values it is given.

use super::{check_name, Definition, DefsError, MetricSet, MAX_EXPANDED_NODES};
use crate::expr::{CompileError, Expr, Program, MAX_DEPTH};

impl MetricSet {
    /// Plans the evaluation of `names`: each is a derived metric, a
    /// defined counter or (anything else) a catalog event name.
    pub fn plan(&self, names: &[&str]) -> Result<Plan, DefsError> {
        let mut plan = Plan {
            counters: Vec::new(),
            outputs: Vec::new(),
            steps: Vec::new(),
            units: Vec::new(),
            descriptions: Vec::new(),
        };
        for &name in names {
            if let Err(reason) = check_name(name) {
                return Err(DefsError::BadRequest {
                    name: name.to_string(),
                    reason,
                });
            }
            let step = match self.get(name) {
                Some(Definition::Metric(m)) => {
                    let mut path = vec![m.name.clone()];
                    let mut budget = MAX_EXPANDED_NODES;
                    let expanded = self.expand(&m.expr, &mut path, 0, &mut budget, name)?;
                    let counters = &mut plan.counters;
                    let program = expanded
                        .compile(|spec| Some(slot_of(counters, spec)))
                        .map_err(|e| DefsError::TooComplex {
                            metric: name.to_string(),
                            reason: match e {
                                CompileError::TooDeep => format!(
                                    "with the derived metrics it uses substituted, its \
                                     expression nests more than {MAX_DEPTH} levels; \
                                     simplify it"
                                ),
                                other => other.to_string(),
                            },
                        })?;
                    Step::Derived(program)
                }
                Some(Definition::Counter(c)) => {
                    Step::Counter(slot_of(&mut plan.counters, &c.spec()))
                }
                None => Step::Counter(slot_of(&mut plan.counters, name)),
            };
            let def = self.get(name);
            plan.outputs.push(name.to_string());
            plan.steps.push(step);
            plan.units
                .push(def.and_then(Definition::unit).map(str::to_string));
            plan.descriptions
                .push(def.and_then(Definition::description).map(str::to_string));
        }
        Ok(plan)
    }

    /// `e` with every derived metric it names substituted by its
    /// (expanded) expression and every counter by its event spec.
    fn expand(
        &self,
        e: &Expr,
        path: &mut Vec<String>,
        depth: usize,
        budget: &mut usize,
        top: &str,
    ) -> Result<Expr, DefsError> {
        if depth > MAX_DEPTH {
            return Err(DefsError::TooComplex {
                metric: top.to_string(),
                reason: format!(
                    "with the derived metrics it uses substituted, its expression nests \
                     more than {MAX_DEPTH} levels; simplify it"
                ),
            });
        }
        if *budget == 0 {
            return Err(DefsError::TooComplex {
                metric: top.to_string(),
                reason: format!(
                    "with the derived metrics it uses substituted, its expression has more \
                     than {MAX_EXPANDED_NODES} terms; simplify it"
                ),
            });
        }
        *budget -= 1;
        Ok(match e {
            Expr::Num(v) => Expr::Num(*v),
            Expr::Name(n) => match self.get(n) {
                Some(Definition::Metric(m)) => {
                    if let Some(at) = path.iter().position(|p| p == &m.name) {
                        let mut cycle: Vec<String> = path[at..].to_vec();
                        let locations = cycle
                            .iter()
                            .map(|c| match self.get(c) {
                                Some(d) => format!("{c} at {}", d.defined_at()),
                                None => c.clone(),
                            })
                            .collect();
                        cycle.push(m.name.clone());
                        return Err(DefsError::Cycle { cycle, locations });
                    }
                    path.push(m.name.clone());
                    let inner = self.expand(&m.expr, path, depth + 1, budget, top)?;
                    path.pop();
                    inner
                }
                Some(Definition::Counter(c)) => Expr::Name(c.spec()),
                None => Expr::Name(n.clone()),
            },
            Expr::Neg(inner) => Expr::Neg(Box::new(self.expand(
                inner,
                path,
                depth + 1,
                budget,
                top,
            )?)),
            Expr::Binary(op, l, r) => Expr::Binary(
                *op,
                Box::new(self.expand(l, path, depth + 1, budget, top)?),
                Box::new(self.expand(r, path, depth + 1, budget, top)?),
            ),
            Expr::Call(f, args) => Expr::Call(
                *f,
                args.iter()
                    .map(|a| self.expand(a, path, depth + 1, budget, top))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }
}

fn slot_of(counters: &mut Vec<String>, spec: &str) -> usize {
    match counters.iter().position(|c| c == spec) {
        Some(i) => i,
        None => {
            counters.push(spec.to_string());
            counters.len() - 1
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    /// A requested counter: pass its slot through.
    Counter(usize),
    /// A derived metric compiled over the counter slots.
    Derived(Program),
}

/// What to count for a list of requested names and how to compute each
/// from the counts.
#[derive(Debug, Clone)]
pub struct Plan {
    counters: Vec<String>,
    outputs: Vec<String>,
    steps: Vec<Step>,
    units: Vec<Option<String>>,
    descriptions: Vec<Option<String>>,
}

impl Plan {
    /// The distinct catalog event specs to count, in first-use order;
    /// [`Plan::evaluate`] takes their values in this order.
    pub fn counters(&self) -> &[String] {
        &self.counters
    }

    /// The requested names, in request order; [`Plan::evaluate`] writes
    /// their values in this order.
    pub fn outputs(&self) -> &[String] {
        &self.outputs
    }

    /// Number of outputs.
    pub fn len(&self) -> usize {
        self.outputs.len()
    }

    /// Whether nothing was requested.
    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty()
    }

    /// The unit of output `i`, when its definition gives one (plain
    /// catalog events have none here; the catalog knows theirs).
    pub fn unit(&self, i: usize) -> Option<&str> {
        self.units.get(i)?.as_deref()
    }

    /// The description of output `i`, when its definition gives one.
    pub fn description(&self, i: usize) -> Option<&str> {
        self.descriptions.get(i)?.as_deref()
    }

    /// Whether output `i` is a derived metric (else a counter passed
    /// through).
    pub fn is_derived(&self, i: usize) -> bool {
        matches!(self.steps.get(i), Some(Step::Derived(_)))
    }

    /// Computes the outputs from the counter values (`counter_values[j]`
    /// is the value of `counters()[j]`; `None`: not counted). Missing
    /// inputs, division by zero and non-finite results give `None`. Writes
    /// `min(out.len(), outputs().len())` values; never allocates or panics.
    pub fn evaluate(&self, counter_values: &[Option<f64>], out: &mut [Option<f64>]) {
        for (step, o) in self.steps.iter().zip(out.iter_mut()) {
            *o = match step {
                Step::Counter(i) => counter_values
                    .get(*i)
                    .copied()
                    .flatten()
                    .filter(|v| v.is_finite()),
                Step::Derived(p) => p.eval(counter_values),
            };
        }
    }
}
