//! Exact duration statistics over a stream, in two passes and bounded
//! memory.
//!
//! Owns the arithmetic behind the region table of `strobe summary`: count,
//! total, minimum, maximum, mean, sample standard deviation (from exact
//! integer sums of durations and of their squares, so parts read by
//! several threads combine by addition and every way of reading the same
//! rows prints the same digits) and the exact median. The median needs
//! no sort of the rows: the first pass also counts durations in
//! log-linear buckets (64 per power of two); the bucket holding the middle
//! rank then tells the second pass which durations to keep, as value →
//! count. Memory grows with groups and with the distinct durations of one
//! bucket per group, never with rows. It never reads a database: callers
//! feed it durations.

use std::collections::BTreeMap;

use crate::scan::IdMap;

/// Buckets per power of two above 64 ns.
const PER_OCTAVE: u32 = 64;

/// The bucket of duration `d`: negative durations in bucket 0, 0–63 ns one
/// bucket per nanosecond, then 64 buckets per power of two. Increasing in
/// `d`.
pub(crate) fn bucket(d: i64) -> u16 {
    if d < 0 {
        return 0;
    }
    if d < PER_OCTAVE as i64 {
        return d as u16 + 1;
    }
    let e = 63 - d.leading_zeros(); // 6..=62
    let shift = e - 6;
    let sub = ((d >> shift) & (PER_OCTAVE as i64 - 1)) as u32;
    (1 + PER_OCTAVE + shift * PER_OCTAVE + sub) as u16
}

/// The sample standard deviation (n − 1 in the denominator; 0 for fewer
/// than two) of `n` durations summing to `sum` whose squares sum to
/// `squares`: (n·squares − sum²) / (n(n − 1)), exact in integers while it
/// fits (durations up to hours, counts up to billions), in floating point
/// beyond. The one formula of every summary path.
pub(crate) fn sample_stddev(n: u64, sum: i128, squares: i128) -> f64 {
    if n < 2 {
        return 0.0;
    }
    let n_i = i128::from(n);
    let spread = n_i
        .checked_mul(squares)
        .and_then(|a| sum.checked_mul(sum).and_then(|b| a.checked_sub(b)));
    let variance = match spread {
        Some(s) => s.max(0) as f64 / (n as f64 * (n - 1) as f64),
        None => {
            let mean = sum as f64 / n as f64;
            ((squares as f64 - mean * sum as f64) / (n - 1) as f64).max(0.0)
        }
    };
    variance.sqrt()
}

/// What the first pass keeps per group.
#[derive(Debug, Clone, Default)]
pub(crate) struct FirstPass {
    pub(crate) n: u64,
    pub(crate) total: i64,
    pub(crate) min: i64,
    pub(crate) max: i64,
    /// Sum of the squared durations (exact while it fits).
    squares: i128,
    buckets: IdMap<u16, u64>,
}

impl FirstPass {
    /// Adds one duration.
    #[inline]
    pub(crate) fn add(&mut self, d: i64) {
        if self.n == 0 {
            self.min = d;
            self.max = d;
        } else {
            self.min = self.min.min(d);
            self.max = self.max.max(d);
        }
        self.n += 1;
        self.total = self.total.saturating_add(d);
        self.squares = self.squares.saturating_add(i128::from(d) * i128::from(d));
        *self.buckets.entry(bucket(d)).or_default() += 1;
    }

    /// Adds everything `other` counted.
    pub(crate) fn merge(&mut self, other: &FirstPass) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = other.clone();
            return;
        }
        self.n += other.n;
        self.squares = self.squares.saturating_add(other.squares);
        self.total = self.total.saturating_add(other.total);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        for (b, c) in &other.buckets {
            *self.buckets.entry(*b).or_default() += c;
        }
    }

    /// The mean.
    pub(crate) fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.total as f64 / self.n as f64
        }
    }

    /// The sample standard deviation (n − 1; 0 for fewer than two).
    pub(crate) fn stddev(&self) -> f64 {
        sample_stddev(self.n, i128::from(self.total), self.squares)
    }

    /// Where the middle rank(s) lie, for the second pass.
    pub(crate) fn median_target(&self) -> MedianTarget {
        let ranks = [(self.n.max(1) - 1) / 2, self.n / 2];
        let mut order: Vec<(u16, u64)> = self.buckets.iter().map(|(b, c)| (*b, *c)).collect();
        order.sort_unstable();
        let mut found = [(0u16, 0u64); 2];
        for (k, rank) in ranks.into_iter().enumerate() {
            let mut below = 0;
            for &(b, c) in &order {
                if rank < below + c {
                    found[k] = (b, rank - below);
                    break;
                }
                below += c;
            }
        }
        MedianTarget { at: found }
    }
}

/// The buckets of the two middle ranks and each rank within its bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MedianTarget {
    at: [(u16, u64); 2],
}

impl MedianTarget {
    /// Whether the second pass must keep duration `d`.
    #[inline]
    pub(crate) fn wants(&self, d: i64) -> bool {
        let b = bucket(d);
        b == self.at[0].0 || b == self.at[1].0
    }

    /// The median from the durations the second pass kept (value → count):
    /// the middle value, or the mean of the two middle values.
    pub(crate) fn median(&self, kept: &BTreeMap<i64, u64>) -> f64 {
        let pick = |(b, rank): (u16, u64)| -> f64 {
            let mut seen = 0;
            for (v, c) in kept.range(..) {
                if bucket(*v) != b {
                    continue;
                }
                seen += c;
                if rank < seen {
                    return *v as f64;
                }
            }
            0.0
        };
        (pick(self.at[0]) + pick(self.at[1])) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_never_decrease_with_the_duration_and_fit_a_u16() {
        let mut values: Vec<i64> = (-5..5000).collect();
        values.extend((6..63).flat_map(|e| [(1i64 << e) - 1, 1 << e, (1 << e) + 1]));
        values.push(i64::MAX);
        values.sort_unstable();
        for w in values.windows(2) {
            assert!(bucket(w[0]) <= bucket(w[1]), "{w:?}");
        }
        // Below 64 ns every nanosecond has its own bucket.
        assert_eq!(bucket(63) - bucket(0), 63);
        assert!(bucket(i64::MAX) < 4000);
    }

    /// The statistics of `values` split in parts, against a sort.
    fn check(values: &[i64], parts: usize) {
        let mut first = FirstPass::default();
        for chunk in values.chunks(values.len().div_ceil(parts).max(1)) {
            let mut p = FirstPass::default();
            for &d in chunk {
                p.add(d);
            }
            first.merge(&p);
        }
        let target = first.median_target();
        let mut kept = BTreeMap::new();
        for &d in values {
            if target.wants(d) {
                *kept.entry(d).or_insert(0) += 1;
            }
        }
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let n = sorted.len();
        let median = (sorted[(n - 1) / 2] + sorted[n / 2]) as f64 / 2.0;
        assert_eq!(target.median(&kept), median, "{values:?}");
        assert_eq!(first.n, n as u64);
        assert_eq!(first.total, sorted.iter().sum::<i64>());
        assert_eq!((first.min, first.max), (sorted[0], sorted[n - 1]));
        let mean = first.total as f64 / n as f64;
        let var = sorted
            .iter()
            .map(|d| (*d as f64 - mean).powi(2))
            .sum::<f64>()
            / (n.max(2) - 1) as f64;
        let want = if n > 1 { var.sqrt() } else { 0.0 };
        assert!(
            (first.stddev() - want).abs() <= 1e-6 * want.max(1.0),
            "{values:?}"
        );
    }

    #[test]
    fn exact_median_mean_and_deviation_whatever_the_split() {
        check(&[7], 1);
        check(&[5, 1], 2);
        check(&[3, 3, 3, 3], 3);
        check(&[-4, 0, 9, 100_000, 65, 64, 63], 2);
        // Many values in one wide bucket, and long tails.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut values = Vec::new();
        for k in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(match k % 4 {
                0 => 1_000_000 + (x % 1000) as i64,
                1 => (x % 50) as i64,
                2 => (x % 10_000_000_000) as i64,
                _ => 1_000_000,
            });
        }
        for parts in [1, 2, 7] {
            check(&values, parts);
            check(&values[..values.len() - 1], parts);
        }
    }
}
