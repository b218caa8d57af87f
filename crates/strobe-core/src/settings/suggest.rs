//! "Did you mean …?": the nearest known name to a misspelt one.
//!
//! Owns the edit-distance rule and nothing else.

/// Levenshtein distance between two strings, by characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The candidate nearest to `wrong`, if it is close enough to be a likely
/// typo (at most a third of its length, and at least 2 edits allowed).
pub fn nearest<'a>(wrong: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wrong = wrong.to_ascii_lowercase();
    let limit = (wrong.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| (edit_distance(&wrong, &c.to_ascii_lowercase()), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn suggests_only_close_names() {
        let names = ["sampling_freq", "sampling_delay", "output_dir"];
        assert_eq!(nearest("samplng_freq", names), Some("sampling_freq"));
        assert_eq!(nearest("OUTPUT_DIRS", names), Some("output_dir"));
        assert_eq!(nearest("completely_else", names), None);
    }
}
